// The tests REVIEW.md proposes, each run twice: on the sample, where each must fail
// (test.failing passes only if the test fails), and on the sample with the three fixes
// (fixed.js), where each must pass. `npx jest` in this folder runs them.
const fixtures = require("./fixtures");

const alpha = { tenant: "alpha", canReadTickets: true };
const implementations = [
  ["the sample", require("./sample"), test.failing],
  ["the sample with the three fixes", require("./fixed"), test],
];

describe.each(implementations)("%s", (_, { executeTool }, it) => {
  let records;
  beforeEach(() => {
    records = fixtures.records();
  });

  // Comment 1
  it("a cursor cannot change the tenant", () => {
    const forged = Buffer.from(JSON.stringify({ tenant: "beta", after: "" })).toString("base64");
    const result = executeTool("search_tickets", { cursor: forged }, alpha, records);
    expect(result).toEqual({ ok: false, code: "invalid_arguments" });
  });

  // Comment 2
  it("A4 returns fresh copies of id, title and status", () => {
    const result = executeTool("search_tickets", { status: "open", query: "LOGIN" }, alpha, records);
    expect(result).toEqual({ ok: true, next_cursor: null, tickets: [
      { id: "TKT-101", title: "Login fails after password reset", status: "open" },
      { id: "TKT-107", title: "Login page slow on mobile", status: "open" },
    ] });
    result.tickets[0].status = "closed";
    expect(records.get("alpha:TKT-101")?.status).toBe("open");
  });

  // Comment 3
  it.each([{ limit: 0 }, { limit: 11 }, { limit: "2" }, { limit: null }, { query: 5 },
    { query: "" }, { cursor: "" }, { tenant: "alpha" }])("rejects %j", (args) => {
    expect(executeTool("search_tickets", args, alpha, records))
      .toEqual({ ok: false, code: "invalid_arguments" });
  });

  it("A3: a ticket ID is a valid cursor", () => {
    expect(executeTool("search_tickets", { cursor: "TKT-110" }, alpha, records)).toEqual({
      ok: true, next_cursor: null, tickets: [
        { id: "TKT-112", title: "Settings page shows wrong time zone", status: "open" },
        { id: "TKT-115", title: "Password reset email delayed", status: "closed" },
      ] });
  });
});
