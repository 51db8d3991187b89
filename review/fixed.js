// The sample with the review's fixes: one parser per tool run before the permission check,
// the tenant only from the context, the cursor a ticket ID, fresh copies of three fields.
const { getTicket, TICKET_ID } = require("./get-ticket");

const SEARCH_ARGS = {
  status: (v) => v === "open" || v === "closed",
  query: (v) => typeof v === "string" && v.length >= 1 && v.length <= 40,
  limit: (v) => Number.isInteger(v) && v >= 1 && v <= 10,
  cursor: (v) => typeof v === "string" && TICKET_ID.test(v),
};

function isPlainObject(args) {
  return typeof args === "object" && args !== null && !Array.isArray(args);
}

function parseSearch(args) {
  if (!isPlainObject(args)) return false;
  return Object.entries(args).every(([key, value]) => Object.hasOwn(SEARCH_ARGS, key) && SEARCH_ARGS[key](value));
}

function searchTickets(args, context, records) {
  if (!parseSearch(args)) return { ok: false, code: "invalid_arguments" };
  if (context.canReadTickets !== true) return { ok: false, code: "forbidden" };
  const tenant = context.tenant;
  const limit = args.limit ?? 5;
  const query = args.query?.toLowerCase();
  const matches = [...records.entries()]
    .filter(([key]) => key.startsWith(tenant + ":"))
    .map(([, ticket]) => ticket)
    .sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
    .filter((t) => args.status === undefined || t.status === args.status)
    .filter((t) => query === undefined || t.title.toLowerCase().includes(query))
    .filter((t) => args.cursor === undefined || t.id > args.cursor);
  const page = matches.slice(0, limit).map(({ id, title, status }) => ({ id, title, status }));
  const more = matches.length > limit;
  return { ok: true, tickets: page, next_cursor: more ? page[page.length - 1].id : null };
}

const TOOLS = new Map([
  ["get_ticket", getTicket],
  ["search_tickets", searchTickets],
]);

function executeTool(name, args, context, records) {
  const tool = TOOLS.get(name);
  if (!tool) return { ok: false, code: "unknown_tool" };
  return tool(args, context, records);
}

module.exports = { executeTool };
