// The demo consent page: it answers the playground window that opened it
// the way an OAuth callback page would, then closes.

const opener = window.opener;
const allow = document.querySelector('[data-testid="allow"]');
const cancel = document.querySelector('[data-testid="cancel"]');

function answer(message) {
  // targetOrigin is this page's own origin: the demo's playground is served
  // by the same runnel, and the answer must reach no other site.
  opener.postMessage({ type: "runnel-connect", ...message }, location.origin);
  window.close();
}

if (opener) {
  allow.addEventListener("click", () => answer({ status: "done", result: { account: "demo@example.com" } }));
  cancel.addEventListener("click", () => answer({ status: "cancelled" }));
} else {
  document.querySelector('[data-testid="no-opener"]').hidden = false;
  allow.disabled = true;
  cancel.disabled = true;
}
