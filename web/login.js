// The sign-in page. A link into the UI from another site (a chat message, an issue) arrives
// without the SameSite=Strict session cookie, so the daemon sends it here even when this browser
// is signed in; a request from this page carries the cookie, so ask, and go on when signed in.
// Where the link pointed (#/runs/5) is kept for after signing in (app.js reads it).
const back = location.hash && location.hash !== "#/" ? location.hash : "";
if (back) sessionStorage.setItem("drover.after-login", back);
fetch("/login/status", { credentials: "same-origin", cache: "no-store" })
  .then((r) => (r.ok ? r.json() : null))
  .then((s) => { if (s && s.signed_in) location.replace("/"); })
  .catch(() => {});
