// The console's one way to the server: the JSON API (SPEC §2) and the event stream
// (SPEC §12), both with the token the reader gave this tab. The token lives in
// sessionStorage only: never a cookie, never a URL the server sees, never a log line.

const TOKEN = "bc.console.token";
const TENANT = "bc.console.tenant";

/** An error answer of the API: its HTTP status, code and message, as the API said them. */
export class ApiError extends Error {
  constructor(status, code, message, field) {
    super(message);
    this.status = status;
    this.code = code;
    this.field = field;
  }
}

/** The signed-in session of this tab, or null. */
export function session() {
  const token = sessionStorage.getItem(TOKEN);
  const tenant = sessionStorage.getItem(TENANT);
  return token && tenant ? { token, tenant } : null;
}

export function remember(token, tenant) {
  sessionStorage.setItem(TOKEN, token);
  sessionStorage.setItem(TENANT, tenant);
}

/** Forgets the token (sign-out, or the API said it is no longer valid). */
export function forget() {
  sessionStorage.removeItem(TOKEN);
}

/** The tenant last used in this tab (kept across sign-outs, to pre-fill the form). */
export const lastTenant = () => sessionStorage.getItem(TENANT) || "";

async function errorOf(resp) {
  const text = await resp.text().catch(() => "");
  let body = null;
  try { body = JSON.parse(text); } catch { /* not JSON: a proxy's page */ }
  const e = body && body.error ? body.error : {};
  return new ApiError(resp.status, e.code || `HTTP_${resp.status}`, e.message || text || resp.statusText, e.field);
}

/** Calls method `name` ("pools.list") with `body`; the tenant is added. */
export async function call(name, body = {}, token = session()?.token, tenant = session()?.tenant) {
  const [resource, method] = name.split(".");
  const resp = await fetch(`/api/compute/${resource}/${method}`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: JSON.stringify({ tenantId: tenant, ...body }),
    cache: "no-store",
    credentials: "omit",
  });
  if (!resp.ok) throw await errorOf(resp);
  return resp.json();
}

/** Every page of a list method (at most `maxPages` pages of 500). */
export async function listAll(name, key, body = {}, maxPages = 20) {
  const out = [];
  let pageToken;
  for (let i = 0; i < maxPages; i++) {
    const page = await call(name, { ...body, pageSize: 500, ...(pageToken ? { pageToken } : {}) });
    out.push(...(page[key] || []));
    pageToken = page.nextPageToken;
    if (!pageToken) break;
  }
  return out;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * Follows the tenant's event stream with fetch (EventSource cannot send the token),
 * calling `onEvent(event)` for each; after a dropped connection it reconnects with the
 * last id seen as `Last-Event-ID`, so nothing is missed or seen twice. It ends by
 * calling `onUnauthenticated(error)` when the API refuses the token (revoked: the
 * server ends the stream, the reconnect is refused), or `onForbidden(error)` when the
 * token may not read the tenant's events. `onState` hears "live" and "reconnecting".
 */
export function follow({ onEvent, onState, onUnauthenticated, onForbidden }) {
  const { token, tenant } = session();
  let stopped = false;
  let ctrl = null;
  let lastId = null;
  (async () => {
    for (let attempt = 0; !stopped; attempt++) {
      ctrl = new AbortController();
      try {
        const headers = { authorization: `Bearer ${token}`, accept: "text/event-stream" };
        if (lastId !== null) headers["last-event-id"] = lastId;
        const resp = await fetch(`/api/compute/events/stream?tenantId=${encodeURIComponent(tenant)}`,
          { headers, signal: ctrl.signal, cache: "no-store", credentials: "omit" });
        if (resp.status === 401) { if (!stopped) onUnauthenticated(await errorOf(resp)); return; }
        if (resp.status === 403) { if (!stopped) onForbidden(await errorOf(resp)); return; }
        if (!resp.ok) throw await errorOf(resp);
        attempt = 0;
        onState("live", lastId);
        const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
        let buf = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buf += value.replace(/\r\n?/g, "\n");
          let end;
          while ((end = buf.indexOf("\n\n")) >= 0) {
            const frame = buf.slice(0, end);
            buf = buf.slice(end + 2);
            let id = null;
            const data = [];
            for (const line of frame.split("\n")) {
              if (line.startsWith(":")) continue; // a keep-alive comment
              const colon = line.indexOf(":");
              const field = colon < 0 ? line : line.slice(0, colon);
              let v = colon < 0 ? "" : line.slice(colon + 1);
              if (v.startsWith(" ")) v = v.slice(1);
              if (field === "id") id = v;
              else if (field === "data") data.push(v);
            }
            if (id !== null) lastId = id;
            if (data.length) {
              try { onEvent(JSON.parse(data.join("\n")), lastId); } catch { /* a bad frame is skipped */ }
            }
          }
        }
      } catch (e) {
        if (stopped) return;
      }
      if (stopped) return;
      onState("reconnecting", lastId);
      // The first retry is quick: a server that ended the stream on a revoked token
      // refuses it at once, and the reader goes back to sign-in within seconds.
      await sleep(Math.min(250 * 2 ** attempt, 5000));
    }
  })();
  return { stop() { stopped = true; if (ctrl) ctrl.abort(); } };
}
