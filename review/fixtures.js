// The brief's fixture store, in insertion order; a fresh Map for every call of records().
const ROWS = [
  ["alpha:TKT-104", { id: "TKT-104", title: "Settings crash", status: "open" }],
  ["beta:TKT-104", { id: "TKT-104", title: "Private billing issue", status: "closed" }],
  ["alpha:TKT-112", { id: "TKT-112", title: "Settings page shows wrong time zone", status: "open" }],
  ["alpha:TKT-101", { id: "TKT-101", title: "Login fails after password reset", status: "open",
    internal_note: "Escalated by the on-call engineer" }],
  ["beta:TKT-108", { id: "TKT-108", title: "Login fails after SSO change", status: "open",
    internal_note: "Security review pending" }],
  ["alpha:TKT-107", { id: "TKT-107", title: "Login page slow on mobile", status: "open" }],
  ["alpha:TKT-115", { id: "TKT-115", title: "Password reset email delayed", status: "closed" }],
  ["beta:TKT-103", { id: "TKT-103", title: "Refund not received", status: "open" }],
  ["alpha:TKT-102", { id: "TKT-102", title: "CSV export times out", status: "closed" }],
  ["alpha:TKT-110", { id: "TKT-110", title: "Invoice PDF missing logo", status: "closed",
    internal_note: "Refund approved by finance" }],
];

function records() {
  return new Map(ROWS.map(([key, ticket]) => [key, { ...ticket }]));
}

module.exports = { records };
