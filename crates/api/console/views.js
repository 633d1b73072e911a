// The console's views. Each reads the JSON API with the tab's token and shows the `bc`
// command that reads the same thing; each returns an `update` the live stream calls, which
// redraws the data and leaves the filters (and the reader's focus) alone.

import { call, listAll, ApiError } from "./api.js";
import { h, fill, num, hours, time, badge, usageChart } from "./fmt.js";

const PAGE = 25;
const SUBSTRATE_STATES = ["pending", "provisioning", "ready", "updating", "error", "deleting", "deleted"];

/** The `bc` command box: the command and a button that copies it. */
function cmd(text) {
  const code = h("code", {}, text);
  const button = h("button", { type: "button", class: "copy", "aria-label": `Copy: ${text}` }, "Copy");
  button.addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(text);
    } catch {
      // No clipboard (an insecure origin): select the text for Ctrl-C instead.
      getSelection().selectAllChildren(code);
    }
    button.textContent = "Copied";
    setTimeout(() => { button.textContent = "Copy"; }, 1500);
  });
  return h("div", { class: "cmd", "data-cmd": text }, h("span", { class: "muted", "aria-hidden": "true" }, "$"), code, button);
}

/** A table: `cols` is [[label, cell(row), class?]]; cells carry their label for narrow screens. */
function table(caption, cols, rows, empty = "None.") {
  if (!rows.length) return h("p", { class: "muted" }, empty);
  return h("div", { class: "table-wrap" }, h("table", { class: "cards" },
    caption ? h("caption", {}, caption) : null,
    h("thead", {}, h("tr", {}, cols.map(([l, , c]) => h("th", { scope: "col", class: c }, l)))),
    h("tbody", {}, rows.map((r) => h("tr", {}, cols.map(([l, f, c]) => h("td", { class: c, "data-label": l }, h("div", {}, f(r)))))))));
}

/** What a panel shows when the API refused a read: its own message. */
function refused(e) {
  if (e instanceof ApiError && e.status === 401) throw e; // the app signs out
  return h("p", { class: "error" }, e instanceof ApiError ? `${e.code}: ${e.message}` : String(e));
}

/** Runs `fn`; a refusal becomes the panel's message (a 401 goes up to sign out). */
async function guarded(fn) {
  try { return await fn(); } catch (e) { return refused(e); }
}

/** At most `n` calls at once over `items`. */
async function mapLimit(items, n, fn) {
  const out = new Array(items.length);
  let next = 0;
  await Promise.all(Array.from({ length: Math.min(n, items.length) }, async () => {
    while (next < items.length) { const i = next++; out[i] = await fn(items[i], i); }
  }));
  return out;
}

/** A pool's substrate, `null` without one, or `{refused}` when the token may not read it. */
async function substrateOf(poolId) {
  try {
    return await call("kubernetesSubstrates.get", { poolId });
  } catch (e) {
    if (e instanceof ApiError && e.code === "NOT_FOUND") return null;
    if (e instanceof ApiError && e.status === 401) throw e;
    return { refused: e.message || String(e) };
  }
}

async function accountsById() {
  try {
    const accounts = await listAll("providerAccounts.list", "providerAccounts");
    return new Map(accounts.map((a) => [a.providerAccountId, a]));
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) throw e;
    return new Map();
  }
}

const accountCell = (accounts, id) => {
  if (!id) return "—";
  const a = accounts.get(id);
  return a ? [h("strong", {}, a.provider), " · ", a.name] : h("span", { class: "mono" }, id);
};

const flavors = (policy) => (policy?.flavors || []).map((f) =>
  h("div", { class: "nowrap" }, h("strong", {}, f.name), " ", h("span", { class: "mono" }, f.size), " ",
    f.autoScale ? `autoscale ${num(f.autoScale.min)}–${num(f.autoScale.max)}` : `× ${num(f.count)}`));

const substrateState = (sub) => (sub === null ? h("span", { class: "muted" }, "no substrate")
  : sub?.refused ? h("span", { class: "muted", title: sub.refused }, "not readable with this token")
  : badge(sub?.state));

const waiting = (sub) => (sub?.waitingToJoin
  ? [num(sub.waitingToJoin.nodes), " node(s) since ", time(sub.waitingToJoin.since)] : "—");
const upgrade = (sub) => (sub?.upgrade
  ? ["to ", h("span", { class: "mono" }, sub.upgrade.version), ", waiting for bookings since ", time(sub.upgrade.since)] : "—");
const nodes = (sub) => (sub && !sub.refused && sub.nodesListed !== undefined
  ? `${num(sub.nodesJoined)} joined / ${num(sub.nodesListed)} listed` : "—");

function header(title, sub) {
  return [h("h1", {}, title), sub ? h("p", { class: "sub" }, sub) : null].filter(Boolean);
}

/** The pools, paged and filtered by name and substrate state. */
function poolsView(root, ctx, query) {
  let q = query.get("q") || "";
  let state = query.get("state") || "";
  let archived = query.get("archived") === "1";
  let page = Math.max(0, Number(query.get("page")) || 0);
  const command = h("div");
  const data = h("div", { class: "panel", "aria-live": "polite" }, h("p", { class: "muted" }, "Loading…"));
  const nameInput = h("input", { type: "search", id: "pool-filter", value: q, placeholder: "name contains…" });
  const stateSelect = h("select", { id: "state-filter" },
    h("option", { value: "" }, "any"), h("option", { value: "none" }, "no substrate"),
    SUBSTRATE_STATES.map((st) => h("option", { value: st, selected: st === state }, st)));
  const archivedBox = h("input", { type: "checkbox", id: "archived-filter", checked: archived });
  const keep = () => {
    const p = new URLSearchParams();
    if (q) p.set("q", q);
    if (state) p.set("state", state);
    if (archived) p.set("archived", "1");
    if (page) p.set("page", String(page));
    const s = p.toString();
    history.replaceState(null, "", `#/pools${s ? `?${s}` : ""}`);
  };
  let debounce;
  nameInput.addEventListener("input", () => {
    clearTimeout(debounce);
    debounce = setTimeout(() => { q = nameInput.value.trim(); page = 0; keep(); update(); }, 200);
  });
  stateSelect.addEventListener("change", () => { state = stateSelect.value; page = 0; keep(); update(); });
  archivedBox.addEventListener("change", () => { archived = archivedBox.checked; page = 0; keep(); update(); });
  root.append(...header("Pools", "Each pool with its Kubernetes substrate."), command,
    h("form", { class: "filters", role: "search", "aria-label": "Filter pools" },
      h("label", { for: "pool-filter" }, "Name", nameInput),
      h("label", { for: "state-filter" }, "Substrate state", stateSelect),
      h("label", { class: "check", for: "archived-filter" }, archivedBox, "Include archived")),
    data);
  root.querySelector("form").addEventListener("submit", (e) => e.preventDefault());

  async function update() {
    fill(command, cmd(`bc pools list --tenant ${ctx.tenant}${archived ? " --include-archived" : ""}`));
    const [pools, accounts] = await Promise.all([
      listAll("pools.list", "pools", archived ? { includeArchived: true } : {}), accountsById()]);
    let rows = pools.filter((p) => !q || p.name.includes(q.toLowerCase()));
    const subs = new Map();
    const need = (list) => list.filter((p) => p.policy?.substrate && !subs.has(p.poolId));
    const fetchSubs = async (list) => {
      const got = await mapLimit(need(list), 8, (p) => substrateOf(p.poolId));
      need(list).forEach((p, i) => subs.set(p.poolId, got[i]));
    };
    if (state) {
      await fetchSubs(rows);
      rows = rows.filter((p) => {
        const sub = p.policy?.substrate ? subs.get(p.poolId) : null;
        return state === "none" ? !sub : sub && sub.state === state;
      });
    }
    const pages = Math.max(1, Math.ceil(rows.length / PAGE));
    if (page >= pages) page = pages - 1;
    const shown = rows.slice(page * PAGE, page * PAGE + PAGE);
    await fetchSubs(shown);
    const sub = (p) => (p.policy?.substrate ? subs.get(p.poolId) : null);
    const prev = h("button", { type: "button", class: "quiet", disabled: page === 0 }, "Previous");
    const next = h("button", { type: "button", class: "quiet", disabled: page + 1 >= pages }, "Next");
    prev.addEventListener("click", () => { page -= 1; keep(); update(); });
    next.addEventListener("click", () => { page += 1; keep(); update(); });
    fill(data, 
      table(null, [
        ["Name", (p) => [h("a", { href: `#/pools/${p.poolId}`, "data-pool": p.poolId }, p.name),
          p.state === "archived" ? [" ", badge("archived")] : null]],
        ["Substrate", (p) => substrateState(sub(p))],
        ["Message", (p) => h("span", { class: "msg" }, sub(p)?.message || "")],
        ["Provider · account", (p) => accountCell(accounts, sub(p)?.providerAccountId || p.policy?.substrate?.account)],
        ["Nodes", (p) => nodes(sub(p))],
        ["Waiting to join", (p) => waiting(sub(p))],
        ["Upgrade", (p) => upgrade(sub(p))],
        ["Flavors", (p) => flavors(p.policy)],
        ["Created", (p) => time(p.createdAt)],
      ], shown, q || state ? "No pool matches." : "No pools yet."),
      h("nav", { class: "pager", "aria-label": "Pages of pools" }, prev,
        h("span", { id: "pool-count" }, rows.length
          ? `${num(page * PAGE + 1)}–${num(page * PAGE + shown.length)} of ${num(rows.length)}` : ""),
        next));
  }
  return update;
}

/** One pool: its substrate, cluster and node pools, load balancers, bookings, events. */
function poolView(root, ctx, poolId) {
  const top = h("div");
  const parts = {
    substrate: h("div", { class: "panel", id: "pool-substrate" }),
    cluster: h("div", { class: "panel", id: "pool-cluster" }),
    nodePools: h("div", { class: "panel", id: "pool-nodepools" }),
    lbs: h("div", { class: "panel", id: "pool-lbs" }),
    bookings: h("div", { class: "panel", id: "pool-bookings" }),
    events: h("div", { class: "panel", id: "pool-events" }),
  };
  root.append(top, h("div", { class: "grid2" }, parts.substrate, parts.cluster), parts.nodePools, parts.lbs,
    parts.bookings, parts.events);
  const t = ctx.tenant;

  async function update() {
    const [pool, accounts] = await Promise.all([call("pools.get", { poolId }), accountsById()]);
    const sub = pool.policy?.substrate ? await substrateOf(poolId) : null;
    fill(top, 
      h("p", {}, h("a", { href: "#/pools" }, "← Pools")),
      ...header(pool.name, null),
      cmd(`bc pools get ${poolId} --tenant ${t}`),
      h("dl", { class: "facts panel" },
        h("dt", {}, "Pool"), h("dd", { class: "mono" }, poolId),
        h("dt", {}, "State"), h("dd", {}, badge(pool.state)),
        h("dt", {}, "Flavors"), h("dd", {}, flavors(pool.policy)),
        h("dt", {}, "Upgrades"), h("dd", {}, pool.policy?.upgrades || "drain"),
        h("dt", {}, "Generation"), h("dd", {}, num(pool.generation)),
        h("dt", {}, "Created"), h("dd", {}, time(pool.createdAt)),
        h("dt", {}, "Updated"), h("dd", {}, time(pool.updatedAt))));

    fill(parts.substrate, h("h2", {}, "Substrate"), cmd(`bc substrates get ${poolId} --tenant ${t}`),
      sub === null ? h("p", { class: "muted" }, "This pool has no substrate.")
        : sub.refused ? h("p", { class: "error" }, sub.refused)
          : h("dl", { class: "facts" },
            h("dt", {}, "State"), h("dd", { id: "substrate-state" }, badge(sub.state)),
            sub.message ? [h("dt", {}, "Message"), h("dd", {}, sub.message)] : null,
            h("dt", {}, "Mode"), h("dd", {}, sub.mode),
            h("dt", {}, "Provider · account"), h("dd", {}, accountCell(accounts, sub.providerAccountId)),
            h("dt", {}, "Nodes"), h("dd", { id: "substrate-nodes" }, nodes(sub)),
            h("dt", {}, "Waiting to join"), h("dd", {}, waiting(sub)),
            h("dt", {}, "Upgrade"), h("dd", {}, upgrade(sub))));

    const clusterId = sub && !sub.refused ? sub.clusterId : undefined;
    fill(parts.cluster, h("h2", {}, "Cluster"),
      clusterId ? await guarded(async () => {
        const cluster = await call("kubernetesClusters.get", { clusterId });
        return [cmd(`bc clusters get ${clusterId} --tenant ${t}`), clusterFacts(cluster)];
      }) : h("p", { class: "muted" }, sub ? "No cluster recorded yet." : "No cluster."));
    parts.nodePools.hidden = !clusterId;
    if (clusterId) {
      fill(parts.nodePools, h("h2", {}, "Node pools"), cmd(`bc nodepools list ${clusterId} --tenant ${t}`),
        await guarded(async () => nodePoolTable(await listAll("kubernetesNodePools.list", "kubernetesNodePools", { clusterId }))));
    }

    fill(parts.lbs, h("h2", {}, "Load balancers"), cmd(`bc lb list --pool ${poolId} --tenant ${t}`),
      await guarded(async () => lbTable(await listAll("loadBalancers.list", "loadBalancers", { poolId }), accounts)));

    fill(parts.bookings, h("h2", {}, "Bookings"), cmd(`bc bookings list ${poolId} --tenant ${t}`),
      await guarded(async () => table(null, [
        ["Booking", (b) => h("span", { class: "mono" }, b.bookingId)],
        ["State", (b) => badge(b.state)],
        ["Node", (b) => b.nodeName || "—"],
        ["Created", (b) => time(b.createdAt)],
        ["Ends", (b) => time(b.endsAt)],
        ["Ended", (b) => time(b.endedAt)],
      ], await listAll("bookings.list", "bookings", { poolId }), "No bookings.")));

    const subjects = [`compute.pools.${poolId}`];
    if (clusterId) subjects.push(`compute.kubernetes.clusters.${clusterId}`);
    fill(parts.events, h("h2", {}, "Events"), cmd(`bc events list --subject compute.pools.${poolId} --tenant ${t}`),
      await guarded(async () => {
        const lists = await Promise.all(subjects.map((subject) => eventsOf({ subject })));
        return timeline(lists.flat().sort((a, b) => b.seq - a.seq).slice(0, 100));
      }));
  }
  return update;
}

/** The newest events (of a subject, or the tenant's), oldest first as the API pages them. */
async function eventsOf(filter, keep = 100) {
  let out = [];
  let afterSeq = 0;
  for (let i = 0; i < 20; i++) {
    const got = (await call("events.list", { ...filter, afterSeq, limit: 500 })).events || [];
    out = out.concat(got).slice(-keep);
    if (got.length < 500) break;
    afterSeq = got[got.length - 1].seq;
  }
  return out;
}

function timeline(events) {
  if (!events.length) return h("p", { class: "muted" }, "No events yet.");
  return h("ol", { class: "timeline", reversed: true }, events.map((e) => h("li", { "data-seq": e.seq },
    h("span", { class: "etype" }, e.type), " · ", time(e.time),
    e.data?.message ? h("div", { class: "msg" }, e.data.message) : null,
    h("div", { class: "muted mono" }, e.subject))));
}

function clusterFacts(c) {
  return h("dl", { class: "facts" },
    h("dt", {}, "Cluster"), h("dd", {}, h("strong", {}, c.name), " ", h("span", { class: "mono muted" }, c.clusterId)),
    h("dt", {}, "State"), h("dd", {}, badge(c.state)),
    c.message ? [h("dt", {}, "Message"), h("dd", {}, c.message)] : null,
    h("dt", {}, "Mode · origin"), h("dd", {}, `${c.mode} · ${c.origin}`),
    h("dt", {}, "Region · version"), h("dd", {}, `${c.region} · ${c.version || "—"}`),
    c.providerClusterId ? [h("dt", {}, "Provider's id"), h("dd", { class: "mono" }, c.providerClusterId)] : null);
}

function nodePoolTable(pools) {
  return table(null, [
    ["Node pool", (p) => h("strong", {}, p.name)],
    ["Size", (p) => h("span", { class: "mono nowrap" }, p.size)],
    ["Count", (p) => (p.autoScale ? `${num(p.autoScale.min)}–${num(p.autoScale.max)} (auto)` : num(p.count)), "num"],
    ["Nodes ready / listed", (p) => `${num(p.nodes?.ready)} / ${num(p.nodes?.listed)}`, "num"],
    ["Managed by", (p) => (p.managedBy ? h("a", { href: `#/pools/${p.managedBy}` }, p.managedBy)
      : p.nodePoolId ? "this system" : h("span", { class: "muted" }, "the provider (read-only)"))],
    ["State", (p) => badge(p.state)],
  ], pools, "No node pools.");
}

/** Clusters, standard and autopilot, with their node pools and node counts. */
function clustersView(root, ctx) {
  const data = h("div");
  root.append(...header("Kubernetes clusters", "Standard clusters with their node pools; autopilot clusters, whose nodes the provider runs."),
    cmd(`bc clusters list --tenant ${ctx.tenant}`), data);
  return async () => {
    const clusters = await listAll("kubernetesClusters.list", "kubernetesClusters");
    const pools = await mapLimit(clusters, 6, (c) => (c.mode === "autopilot" ? [] :
      listAll("kubernetesNodePools.list", "kubernetesNodePools", { clusterId: c.clusterId }).catch((e) => refused(e))));
    if (!clusters.length) { fill(data, h("p", { class: "muted panel" }, "No clusters.")); return; }
    fill(data, ...clusters.map((c, i) => {
      const np = pools[i];
      const counted = Array.isArray(np) ? np : [];
      const ready = counted.reduce((n, p) => n + (p.nodes?.ready || 0), 0);
      const listed = counted.reduce((n, p) => n + (p.nodes?.listed || 0), 0);
      return h("section", { class: "panel", "aria-label": `Cluster ${c.name}`, "data-cluster": c.clusterId },
        h("h2", {}, c.name, " ", badge(c.state), " ", h("span", { class: "badge" }, c.mode)),
        clusterFacts(c),
        c.substratePoolIds?.length ? h("p", {}, "Substrate of ", c.substratePoolIds.map((p) => h("a", { href: `#/pools/${p}` }, p))) : null,
        c.mode === "autopilot"
          ? h("p", { class: "muted" }, "Autopilot: the provider runs the nodes as workloads need them; there are no node pools.")
          : [h("p", {}, `Nodes: ${num(ready)} ready of ${num(listed)} listed in ${num(counted.length)} node pool(s).`),
            cmd(`bc nodepools list ${c.clusterId} --tenant ${ctx.tenant}`),
            Array.isArray(np) ? nodePoolTable(np) : np]);
    }));
  };
}

const rule = (r) => `${r.entryProtocol}:${r.entryPort} → ${r.targetProtocol}:${r.targetPort}${r.tlsPassthrough ? " (TLS passthrough)" : ""}`;

/** A table of load balancers; `pools` (id → pool) names their pools, or the column is left out. */
function lbTable(lbs, accounts, pools = null) {
  return table(null, [
    ["Name", (l) => [h("strong", {}, l.name), h("div", { class: "mono muted" }, l.loadBalancerId)]],
    ["Type · region", (l) => `${l.type}${l.region ? ` · ${l.region}` : ""}`],
    ["State", (l) => [badge(l.state), l.message ? h("div", { class: "msg" }, l.message) : null]],
    ["IP", (l) => h("span", { class: "mono" }, l.ip || "—")],
    ["Rules", (l) => (l.forwardingRules?.length ? l.forwardingRules.map((r) => h("div", { class: "mono" }, rule(r)))
      : l.globalSettings ? h("div", { class: "mono" }, `${(l.domains || []).map((d) => d.name).join(", ")} → ${l.globalSettings.targetProtocol}:${l.globalSettings.targetPort}`) : "—")],
    pools ? ["Pool", (l) => h("a", { href: `#/pools/${l.poolId}` }, pools.get(l.poolId)?.name || l.poolId)] : null,
    ["Account", (l) => accountCell(accounts, l.providerAccountId)],
    ["Created", (l) => time(l.createdAt)],
  ].filter(Boolean), lbs, "No load balancers.");
}

function lbsView(root, ctx) {
  const data = h("div", { class: "panel" });
  root.append(...header("Load balancers"), cmd(`bc lb list --tenant ${ctx.tenant}`), data);
  return async () => {
    const [lbs, accounts, pools] = await Promise.all([listAll("loadBalancers.list", "loadBalancers"), accountsById(),
      listAll("pools.list", "pools", { includeArchived: true }).catch((e) => { refused(e); return []; })]);
    fill(data, lbTable(lbs, accounts, new Map(pools.map((p) => [p.poolId, p]))));
  };
}

function accountsView(root, ctx) {
  const data = h("div", { class: "panel" });
  root.append(...header("Provider accounts", "Their credentials are write-only: no method returns them."),
    cmd(`bc accounts list --tenant ${ctx.tenant}`), data);
  return async () => {
    const accounts = await listAll("providerAccounts.list", "providerAccounts");
    fill(data, table(null, [
      ["Name", (a) => h("strong", {}, a.name)],
      ["Provider", (a) => a.provider],
      ["Project", (a) => a.projectId || "—"],
      ["Account", (a) => h("span", { class: "mono" }, a.providerAccountId)],
      ["Created", (a) => time(a.createdAt)],
    ], accounts, "No provider accounts."));
  };
}

const DAYS = 7;
const iso = (d) => d.toISOString();

/** Billing usage of the last seven UTC days: a chart of hours per day per meter, and the lines. */
function billingView(root, ctx) {
  const command = h("div");
  const chart = h("div", { class: "panel" });
  const lines = h("div", { class: "panel" });
  root.append(...header("Billing usage", `Hours per UTC day per meter, the last ${DAYS} days.`), command,
    chart, h("h2", {}, "Lines"), lines);
  return async () => {
    const today = new Date();
    today.setUTCHours(0, 0, 0, 0);
    const days = Array.from({ length: DAYS }, (_, i) => new Date(today.getTime() - (DAYS - 1 - i) * 86400000));
    const from = iso(days[0]);
    const to = iso(new Date(today.getTime() + 86400000));
    fill(command, cmd(`bc billing usage --from ${from} --to ${to} --tenant ${ctx.tenant}`));
    // One call per day: the API clips each line to the window, so a day's hours are its own.
    const [all, ...perDay] = await Promise.all([call("billing.usage", { from, to }),
      ...days.map((d) => call("billing.usage", { from: iso(d), to: iso(new Date(d.getTime() + 86400000)) }))]);
    const meters = [...new Set(all.lines.map((l) => l.meter))].sort();
    const series = meters.map((meter) => ({
      meter,
      values: perDay.map((u) => u.lines.filter((l) => l.meter === meter).reduce((n, l) => n + Number(l.quantity), 0)),
    }));
    fill(chart, meters.length ? usageChart(days, series) : h("p", { class: "muted" }, "No usage in these days."));
    fill(lines, table(null, [
      ["Meter", (l) => h("span", { class: "mono" }, l.meter)],
      ["Resource", (l) => h("span", { class: "mono" }, l.resource)],
      ["Pool", (l) => h("a", { href: `#/pools/${l.poolId}` }, l.poolId)],
      ["Hours", (l) => hours(l.quantity), "num"],
      ["From", (l) => time(l.from)],
      ["To", (l) => time(l.to)],
    ], all.lines, "No usage."));
  };
}

function eventsView(root, ctx) {
  const data = h("div", { class: "panel" });
  root.append(...header("Events", "The tenant's newest events first; new ones appear as they happen."),
    cmd(`bc events tail --tenant ${ctx.tenant}`), data);
  return async () => {
    const events = await eventsOf({});
    fill(data, timeline(events.reverse()));
  };
}

/** The view of a route (`pools`, `pools/<id>`, …): draws it in `root`, returns its title and update. */
export function route(path, query, root, ctx) {
  const [name, id] = path.split("/");
  switch (name) {
    case "pools": return id ? { nav: "pools", title: "Pool", update: poolView(root, ctx, id) }
      : { nav: "pools", title: "Pools", update: poolsView(root, ctx, query) };
    case "clusters": return { nav: "clusters", title: "Clusters", update: clustersView(root, ctx) };
    case "load-balancers": return { nav: "load-balancers", title: "Load balancers", update: lbsView(root, ctx) };
    case "accounts": return { nav: "accounts", title: "Accounts", update: accountsView(root, ctx) };
    case "billing": return { nav: "billing", title: "Billing", update: billingView(root, ctx) };
    case "events": return { nav: "events", title: "Events", update: eventsView(root, ctx) };
    default: return null;
  }
}
