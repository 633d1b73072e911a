// The console's DOM and formatting helpers: elements are built with the DOM API (never from
// markup text, so no text from the API is ever parsed as markup), numbers and times in the
// reader's locale (Intl), and the usage chart drawn as SVG.

const SVG_NS = "http://www.w3.org/2000/svg";

/** An element: h("a", {href: "#/x", class: "c"}, "text", child, [more]). */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

/** An SVG element. */
export function s(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

/** Replaces `el`'s children (nested arrays flattened; null, undefined and false left out). */
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

function setAttrs(el, attrs) {
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

const numberFmt = new Intl.NumberFormat(undefined);
const hoursFmt = new Intl.NumberFormat(undefined, { maximumFractionDigits: 2 });
const dateTimeFmt = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "medium" });
const dayFmt = new Intl.DateTimeFormat(undefined, { month: "short", day: "numeric", timeZone: "UTC" });
const relFmt = new Intl.RelativeTimeFormat(undefined, { numeric: "auto", style: "short" });

/** A count in the reader's locale. */
export const num = (n) => (n === undefined || n === null ? "—" : numberFmt.format(n));
/** Hours (a decimal string or number) in the reader's locale, two decimals at most. */
export const hours = (x) => hoursFmt.format(Number(x));
/** A UTC day label (the chart's days are UTC days, as the API's times are). */
export const day = (d) => dayFmt.format(d);

/** "3 min ago" / "in 2 h" for an RFC 3339 time, against `now` (ms). */
export function relative(iso, now = Date.now()) {
  let secs = Math.round((Date.parse(iso) - now) / 1000);
  // A server clock a little ahead of the reader's is skew, not the future.
  if (secs > 0 && secs < 90) secs = 0;
  const abs = Math.abs(secs);
  if (abs < 45) return relFmt.format(secs, "second");
  if (abs < 45 * 60) return relFmt.format(Math.round(secs / 60), "minute");
  if (abs < 22 * 3600) return relFmt.format(Math.round(secs / 3600), "hour");
  return relFmt.format(Math.round(secs / 86400), "day");
}

/** A <time> showing the local date and time and how long ago; refreshed by `tick`. */
export function time(iso) {
  if (!iso) return h("span", { class: "muted" }, "—");
  return h("time", { datetime: iso, title: iso, "data-rel": "1" },
    `${dateTimeFmt.format(new Date(iso))} (${relative(iso)})`);
}

/** Brings every relative time on the page up to date. */
export function tick() {
  for (const t of document.querySelectorAll("time[data-rel]")) {
    const iso = t.getAttribute("datetime");
    t.textContent = `${dateTimeFmt.format(new Date(iso))} (${relative(iso)})`;
  }
}

/** A state badge: the text, plus the colour people expect (green ready, red error…). */
export function badge(state) {
  const st = state || "none";
  return h("span", { class: `badge state-${st.replace(/[^a-z]/g, "")}`, "data-state": st }, st);
}

/**
 * Hours per UTC day per meter as grouped bars. `days` are Date objects (UTC midnight),
 * `series` is [{meter, values: [hours per day]}].
 */
export function usageChart(days, series) {
  const W = 760, H = 280, left = 64, right = 12, top = 20, bottom = 34;
  const max = Math.max(1e-9, ...series.flatMap((x) => x.values));
  const step = niceStep(max / 4);
  const ymax = Math.max(step, Math.ceil(max / step) * step);
  const plotW = W - left - right, plotH = H - top - bottom;
  const groupW = plotW / Math.max(1, days.length);
  const barW = Math.max(2, (groupW * 0.72) / Math.max(1, series.length));
  const y = (v) => top + plotH - (v / ymax) * plotH;
  const svg = s("svg", { viewBox: `0 0 ${W} ${H}`, role: "img",
    "aria-label": "Hours per day per meter (bars); the table below holds the same numbers" });
  // As many decimals as the step needs, so small totals (minutes of use) read right.
  const exp = Math.floor(Math.log10(step));
  const mantissa = step / 10 ** exp;
  const halves = Math.abs(mantissa - Math.round(mantissa)) > 1e-9 ? 1 : 0; // a step of 2.5
  const digits = Math.min(6, Math.max(0, -exp + halves));
  const tickFmt = new Intl.NumberFormat(undefined, { maximumFractionDigits: digits, minimumFractionDigits: digits });
  for (let i = 0; i * step <= ymax + 1e-9; i++) {
    const v = i * step;
    svg.append(s("line", { class: "grid", x1: left, x2: W - right, y1: y(v), y2: y(v) }));
    svg.append(s("text", { x: left - 6, y: y(v) + 4, "text-anchor": "end" }, tickFmt.format(v)));
  }
  svg.append(s("line", { class: "axis", x1: left, x2: W - right, y1: y(0), y2: y(0) }));
  svg.append(s("text", { x: left, y: 9, "text-anchor": "start" }, "hours"));
  days.forEach((d, i) => {
    const gx = left + i * groupW + groupW * 0.14;
    series.forEach((ser, j) => {
      const v = ser.values[i] || 0;
      const r = s("rect", { class: `m${j % 5}`, x: gx + j * barW, y: y(v), width: barW - 1,
        height: Math.max(0, y(0) - y(v)) });
      r.append(s("title", {}, `${ser.meter}, ${day(d)}: ${hours(v)} h`));
      svg.append(r);
    });
    svg.append(s("text", { x: left + i * groupW + groupW / 2, y: H - bottom + 16, "text-anchor": "middle" },
      day(d)));
  });
  const legend = h("ul", { class: "legend" },
    series.map((ser, j) => h("li", {}, h("span", { class: `key m${j % 5}` }), ser.meter)));
  return h("figure", { class: "chart" }, svg, legend);
}

function niceStep(raw) {
  if (raw <= 0) return 1;
  const p = 10 ** Math.floor(Math.log10(raw));
  for (const m of [1, 2, 2.5, 5, 10]) if (raw <= m * p) return m * p;
  return 10 * p;
}
