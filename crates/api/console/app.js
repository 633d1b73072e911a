// The console's entry: takes a sign-in link's token out of the address bar at once,
// signs in (the token checked by the API, kept in sessionStorage), routes between views,
// and keeps the shown view live from the event stream — or, for a token that may not read
// the tenant's events, by reading the view again every 2 seconds.

import { session, remember, forget, lastTenant, call, follow, ApiError } from "./api.js";
import { tick } from "./fmt.js";
import { route } from "./views.js";

// First of all: a sign-in link's fragment (#token=…&tenant=…) leaves the address bar and
// the history before anything else runs.
const fromLink = (() => {
  if (!location.hash.startsWith("#token=")) return null;
  const params = new URLSearchParams(location.hash.slice(1));
  history.replaceState(null, "", `${location.pathname}#/pools`);
  return { token: params.get("token") || "", tenant: params.get("tenant") || "" };
})();

const $ = (id) => document.getElementById(id);
const POLL_MS = 2000;
let live = null;
let poll = null;
let current = null;
let refreshTimer = null;
let seq = 0;

function showSignIn(message) {
  $("nav").hidden = true;
  $("who").hidden = true;
  $("view").hidden = true;
  $("view").replaceChildren();
  $("signin").hidden = false;
  const err = $("signin-error");
  err.hidden = !message;
  err.textContent = message || "";
  if (!$("signin-tenant").value) $("signin-tenant").value = lastTenant();
  document.title = "Sign in · Better Compute";
  ($("signin-token").value ? $("signin-submit") : $("signin-token")).focus();
}

async function signIn(token, tenant) {
  $("signin-submit").disabled = true;
  try {
    // The API decides: a wrong, revoked or foreign token is refused with its message.
    await call("pools.list", { pageSize: 1 }, token, tenant);
    remember(token, tenant);
    $("signin-token").value = "";
    start();
  } catch (e) {
    showSignIn(e instanceof ApiError ? `${e.message} (${e.code})` : `The API could not be reached: ${e}`);
  } finally {
    $("signin-submit").disabled = false;
  }
}

function signOut(message) {
  if (live) live.stop();
  live = null;
  clearInterval(poll);
  poll = null;
  current = null;
  forget();
  history.replaceState(null, "", location.pathname);
  showSignIn(message);
}

function setLive(state, text) {
  const el = $("live");
  el.dataset.state = state;
  el.textContent = text;
}

function start() {
  const { tenant } = session();
  $("signin").hidden = true;
  $("nav").hidden = false;
  $("who").hidden = false;
  $("view").hidden = false;
  $("tenant-name").textContent = tenant;
  if (!location.hash.startsWith("#/")) history.replaceState(null, "", `${location.pathname}#/pools`);
  setLive("connecting", "connecting");
  live = follow({
    onEvent: (_event, id) => { document.body.dataset.lastEventId = id; refreshSoon(); },
    onState: (state) => {
      setLive(state, state === "live" ? "live" : "reconnecting…");
      if (state === "live") refreshSoon(); // whatever happened while it was down
    },
    onUnauthenticated: (e) => signOut(`Signed out: ${e.message} (${e.code})`),
    onForbidden: () => {
      // This token may not read the tenant's events: read the view again instead.
      setLive("polling", "refreshing every 2 s");
      poll = setInterval(refresh, POLL_MS);
    },
  });
  render(true);
}

/** Draws the view the address names. */
function render(focus) {
  const view = $("view");
  const hash = location.hash.slice(2) || "pools";
  const [path, qs] = hash.split("?");
  const ctx = { tenant: session().tenant };
  view.replaceChildren();
  current = route(path, new URLSearchParams(qs || ""), view, ctx);
  if (!current) {
    view.replaceChildren(Object.assign(document.createElement("p"), { textContent: "No such view." }));
    return;
  }
  for (const a of document.querySelectorAll("#nav a")) {
    if (a.dataset.view === current.nav) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  document.title = `${current.title} · Better Compute`;
  if (focus) $("main").focus({ preventScroll: true });
  refresh();
}

/** Reads the current view again; a refused token signs out, other failures are shown. */
async function refresh() {
  const view = current;
  if (!view) return;
  const mine = ++seq;
  try {
    await view.update();
    if (mine === seq) document.body.dataset.refreshed = String(mine);
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) {
      signOut(`Signed out: ${e.message} (${e.code})`);
      return;
    }
    if (current !== view) return;
    let box = document.getElementById("view-error");
    if (!box) {
      box = Object.assign(document.createElement("p"), { id: "view-error", className: "error" });
      box.setAttribute("role", "alert");
      $("view").prepend(box);
    }
    box.textContent = e instanceof ApiError ? `${e.code}: ${e.message}` : String(e);
  }
}

/** One refresh for a burst of events, at most 250 ms after the first. */
function refreshSoon() {
  if (refreshTimer) return;
  refreshTimer = setTimeout(() => { refreshTimer = null; refresh(); }, 250);
}

$("signin-form").addEventListener("submit", (e) => {
  e.preventDefault();
  signIn($("signin-token").value.trim(), $("signin-tenant").value.trim());
});
$("sign-out").addEventListener("click", () => signOut());
window.addEventListener("hashchange", () => { if (session() && live) render(true); });
setInterval(tick, 15000);

if (fromLink && fromLink.token && fromLink.tenant) {
  signIn(fromLink.token, fromLink.tenant);
} else if (fromLink && fromLink.token) {
  $("signin-token").value = fromLink.token;
  showSignIn("Name the tenant to sign in to.");
} else if (session()) {
  start();
} else {
  showSignIn();
}
