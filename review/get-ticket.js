// get_ticket as the starting adapter's table defines it (the sample says it is unchanged).
const TICKET_ID = /^TKT-[0-9]{3}$/;

function getTicket(args, context, records) {
  if (typeof args !== "object" || args === null || Array.isArray(args)) {
    return { ok: false, code: "invalid_arguments" };
  }
  const keys = Object.keys(args);
  if (keys.length !== 1 || keys[0] !== "ticket_id") return { ok: false, code: "invalid_arguments" };
  if (typeof args.ticket_id !== "string" || !TICKET_ID.test(args.ticket_id)) {
    return { ok: false, code: "invalid_arguments" };
  }
  if (context.canReadTickets !== true) return { ok: false, code: "forbidden" };
  const stored = records.get(`${context.tenant}:${args.ticket_id}`);
  if (stored === undefined) return { ok: false, code: "not_found" };
  return { ok: true, ticket: { id: stored.id, title: stored.title, status: stored.status } };
}

module.exports = { getTicket, TICKET_ID };
