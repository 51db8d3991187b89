// The sample's own search.test.ts, transcribed (the types removed; `records` is the fixture
// store, made once for the file as the sample's import is). It passes on the sample.
const { executeTool } = require("./sample");
const records = require("./fixtures").records();

const alpha = { tenant: "alpha", canReadTickets: true };

test("returns the first page", () => {
  const result = executeTool("search_tickets", {}, alpha, records);
  expect(result.tickets).toHaveLength(5);
});

test("returns the next page", () => {
  const first = executeTool("search_tickets", {}, alpha, records);
  const second = executeTool("search_tickets", { cursor: first.next_cursor }, alpha, records);
  expect(second.tickets).toHaveLength(2);
});

test("filters by status", () => {
  const result = executeTool("search_tickets", { status: "closed" }, alpha, records);
  expect(result.tickets.every((t) => t.status === "closed")).toBe(true);
});
