// The brief's sample submission (tools.ts), transcribed to JavaScript: the types removed,
// every statement kept as written.
const { getTicket } = require("./get-ticket");

const TOOLS = new Map([
  ["get_ticket", getTicket], // unchanged from the starting adapter
  ["search_tickets", searchTickets],
]);

function executeTool(name, args, context, records) {
  const tool = TOOLS.get(name);
  if (!tool) return { ok: false, code: "unknown_tool" };
  return tool(args, context, records);
}

function searchTickets(args, context, records) {
  if (typeof args !== "object" || args === null || Array.isArray(args)) {
    return { ok: false, code: "invalid_arguments" };
  }
  if (args.status !== undefined && args.status !== "open" && args.status !== "closed") {
    return { ok: false, code: "invalid_arguments" };
  }
  if (!context.canReadTickets) return { ok: false, code: "forbidden" };

  // The cursor is opaque, so the model cannot tamper with it.
  let tenant = context.tenant;
  let after = "";
  if (args.cursor) {
    const decoded = JSON.parse(Buffer.from(args.cursor, "base64").toString("utf8"));
    tenant = decoded.tenant;
    after = decoded.after;
  }
  const limit = args.limit ?? 5;
  const query = (args.query ?? "").toLowerCase();

  const matches = [...records.entries()]
    .filter(([key]) => key.startsWith(tenant + ":"))
    .map(([, ticket]) => ticket)
    .filter((t) => args.status === undefined || t.status === args.status)
    .filter((t) => t.title.toLowerCase().includes(query))
    .filter((t) => t.id > after)
    .sort((a, b) => (a.id < b.id ? -1 : 1));

  const page = matches.slice(0, limit);
  const more = matches.length > limit;
  const last = page[page.length - 1];
  return {
    ok: true,
    tickets: page,
    next_cursor: more ? Buffer.from(JSON.stringify({ tenant, after: last.id })).toString("base64") : null,
  };
}

module.exports = { executeTool };
