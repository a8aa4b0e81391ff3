// The explorer page: pick or upload a problem, move its figures, and show the verified plan the
// server solves for them. Every change is sent as `--set` overrides; text from the server is
// shown with textContent only, and charts are images, so nothing in a problem runs here.
"use strict";

const state = { request: null, controls: [], touched: new Map(), seq: 0, result: null, timer: null };
const $ = (id) => document.getElementById(id);
const usd = (x) => (x == null ? "—" : "$" + Math.round(x).toLocaleString("en-US"));
const num = (x, digits = 0) =>
  x == null ? "—" : Number(x).toLocaleString("en-US", { maximumFractionDigits: digits });

async function api(path, body) {
  const response = await fetch(path, {
    method: body === undefined ? "GET" : "POST",
    headers: { "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!response.ok) {
    let message = `HTTP ${response.status}`;
    try {
      message = (await response.json()).error || message;
    } catch (e) { /* not JSON */ }
    const retry = response.headers.get("Retry-After");
    throw new Error(retry ? `${message} (retry after ${retry} s)` : message);
  }
  return response.headers.get("Content-Type").startsWith("application/json")
    ? response.json()
    : response.text();
}

function el(tag, text, cls) {
  const node = document.createElement(tag);
  if (text !== undefined) node.textContent = text;
  if (cls) node.className = cls;
  return node;
}

function table(headers, rows) {
  const t = el("table");
  const head = t.createTHead().insertRow();
  headers.forEach((h) => head.appendChild(el("th", h)));
  const body = t.createTBody();
  rows.forEach((r) => {
    const row = body.insertRow();
    r.forEach((c) => row.appendChild(el("td", String(c))));
  });
  return t;
}

// ---- the request: problem + overrides ------------------------------------------------------

function overrides() {
  const sets = [];
  state.touched.forEach((value, path) => sets.push(`${path}=${value === null ? "null" : value}`));
  const dev = $("price-device").value;
  if (dev && $("price-buy").value !== "") sets.push(`market.prices.${dev}.purchase_usd=${$("price-buy").value}`);
  if (dev && $("price-rent").value !== "") sets.push(`market.prices.${dev}.rent_usd_per_hour=${$("price-rent").value}`);
  $("sets").value.split("\n").map((s) => s.trim()).filter((s) => s).forEach((s) => sets.push(s));
  return sets;
}

function request(extra = {}) {
  return { ...state.request, sets: overrides(), ...extra };
}

function showError(message) {
  $("error").hidden = !message;
  $("error").textContent = message || "";
}

// ---- controls ---------------------------------------------------------------------------

function control(c) {
  const box = el("div", undefined, "control");
  box.dataset.path = c.path;
  const name = el("label", undefined, "name");
  const on = document.createElement("input");
  on.type = "checkbox";
  on.checked = c.value !== null;
  on.disabled = !c.optional;
  on.title = c.optional ? "set this limit" : "always set";
  name.append(on, ` ${c.label} (${c.unit})`);
  const range = document.createElement("input");
  range.type = "range";
  const field = document.createElement("input");
  field.type = "number";
  for (const input of [range, field]) {
    input.min = c.min;
    input.max = c.max;
    input.step = c.step;
    input.value = c.value === null ? c.max : c.value;
    input.disabled = c.value === null;
    input.setAttribute("aria-label", c.label);
  }
  const changed = (value) => {
    state.touched.set(c.path, on.checked ? value : null);
    schedule();
  };
  range.addEventListener("input", () => { field.value = range.value; changed(range.value); });
  field.addEventListener("change", () => { range.value = field.value; changed(field.value); });
  on.addEventListener("change", () => {
    range.disabled = field.disabled = !on.checked;
    changed(field.value);
  });
  box.append(name, range, field);
  return box;
}

function showControls(info) {
  $("problem-name").textContent = info.name;
  $("description").textContent = info.description || "";
  const box = $("controls");
  box.replaceChildren(...info.controls.map(control));
  state.controls = info.controls;
  $("sweep-path").replaceChildren(
    ...info.controls.map((c) => { const o = el("option", c.label); o.value = c.path; return o; })
  );
  const dev = $("price-device");
  dev.replaceChildren(el("option", "(device)"), ...info.devices.map((d) => el("option", d)));
  dev.firstChild.value = "";
}

function schedule() {
  clearTimeout(state.timer);
  state.timer = setTimeout(solve, 250);
}

// ---- the plan ---------------------------------------------------------------------------

function showPlan(result) {
  const plan = result.plan;
  const status = $("status");
  status.textContent = `${plan.problem}: ${plan.status}`;
  status.className = plan.status;
  $("confidence").textContent = `Confidence: ${result.confidence}`;
  $("why").hidden = result.has_plan;
  $("explanation").hidden = true;
  $("download-json").disabled = $("download-md").disabled = false;
  const parts = [];
  if (result.has_plan) {
    const devices = plan.devices.map((d) => `${d.count} × ${d.type}`).join(" + ");
    $("decision").textContent = `Buy or rent ${devices}: ${usd(plan.tco_usd)} over the horizon.`;
    parts.push(el("h3", "Bill of materials"));
    parts.push(table(
      ["item", "count", "bought", "owned", "rented", "unit price", "total"],
      [
        ...plan.devices.map((d) => [d.type, d.count, d.bought, d.owned, d.on_demand + d.reserved + d.spot, usd(d.unit_price_usd), usd(d.total_usd)]),
        ...plan.nodes.map((n) => [`${n.type} (host)`, n.count, "", "", "", usd(n.unit_price_usd), usd(n.total_usd)]),
      ]
    ));
    const c = plan.costs;
    parts.push(el("h3", "Costs over the horizon"));
    parts.push(table(["kind", "USD"], [
      ["devices and hosts bought", usd(c.capex_usd)],
      ["maintenance", usd(c.maintenance_usd)],
      ["energy", usd(c.energy_usd)],
      ["rent", usd(c.rent_on_demand_usd + c.rent_reserved_usd + c.rent_spot_usd)],
      ["training jobs", usd(c.training_usd)],
      ["total", usd(c.total_usd)],
    ]));
    parts.push(el("p", `Power at load ${num(plan.power_w)} W (${num(plan.wall_power_w)} W at the wall), ${plan.rack_units} rack units.`));
    parts.push(el("h3", "Workloads"));
    parts.push(table(
      ["workload", "model", "replicas", "tokens/s", "ms/token", "TTFT s", "power W"],
      plan.workloads.map((w) => [w.name, w.model, w.replicas, num(w.tokens_per_s), num(w.ms_per_token, 1), num(w.ttft_s, 2), num(w.power_w)])
    ));
    parts.push(el("h3", "Binding constraints"));
    parts.push(el("p", plan.binding_constraints.length ? plan.binding_constraints.join(", ") : "none: every limit has slack"));
  } else {
    $("decision").textContent = "No plan meets these figures.";
  }
  if (plan.notes.length) {
    parts.push(el("h3", "Notes"));
    const list = el("ul");
    plan.notes.forEach((n) => list.appendChild(el("li", n)));
    parts.push(list);
  }
  $("plan").replaceChildren(...parts);
}

async function solve() {
  const seq = ++state.seq;
  $("status").textContent = "solving…";
  $("status").className = "";
  try {
    const result = await api("/api/solve", request());
    if (seq !== state.seq) return; // a newer change is on its way
    state.result = result;
    showError("");
    showPlan(result);
  } catch (e) {
    if (seq !== state.seq) return;
    $("status").textContent = "error";
    $("status").className = "error";
    showError(e.message);
  }
}

// A sentence of the explanation; one that ends in `--set PATH=VALUE` gets a button applying it.
function sentence(text) {
  const item = el("li", text);
  const found = text.match(/--set (\S+)=(\S+)$/);
  if (found) {
    const apply = el("button", "apply", "apply");
    apply.type = "button";
    apply.addEventListener("click", () => applySet(found[1], found[2]));
    item.append(" ", apply);
  }
  return item;
}

function applySet(path, value) {
  const box = document.querySelector(`.control[data-path="${CSS.escape(path)}"]`);
  if (box) {
    const [on, range, field] = box.querySelectorAll("input");
    on.checked = true;
    range.disabled = field.disabled = false;
    if (Number(value) > Number(range.max)) range.max = field.max = value;
    range.value = field.value = value;
    state.touched.set(path, value);
  } else {
    $("sets").value = ($("sets").value.trim() + `\n${path}=${value}`).trim();
  }
  solve();
}

async function whyNot() {
  $("why").disabled = true;
  try {
    const ex = await api("/api/explain", request());
    $("explanation-list").replaceChildren(...ex.sentences.map(sentence));
    $("explanation").hidden = false;
  } catch (e) {
    showError(e.message);
  } finally {
    $("why").disabled = false;
  }
}

// ---- charts and downloads ----------------------------------------------------------------

function sweepSpec() {
  const c = state.controls.find((x) => x.path === $("sweep-path").value);
  const touched = state.touched.get(c.path);
  const value = touched != null ? Number(touched) : c.value;
  const lo = value ? value * 0.5 : c.min;
  const hi = value ? Math.min(value * 1.5, c.unit === "share" ? c.max : Infinity) : c.max;
  const round = (x) => Number(x.toPrecision(4));
  return `${c.path}=${round(lo)}..${round(hi)}:6`;
}

async function chart(kind) {
  $("chart-status").textContent = `drawing the ${kind} chart…`;
  try {
    const extra = kind === "sweep" ? { kind, vary: sweepSpec() } : { kind };
    const svg = await api("/api/chart", request(extra));
    const img = $("chart");
    img.src = "data:image/svg+xml;base64," + btoa(unescape(encodeURIComponent(svg)));
    img.alt = `${kind} chart`;
    img.hidden = false;
    $("chart-status").textContent = "";
  } catch (e) {
    $("chart-status").textContent = e.message;
  }
}

function download(name, text, type) {
  const a = document.createElement("a");
  a.href = URL.createObjectURL(new Blob([text], { type }));
  a.download = name;
  document.body.appendChild(a);
  a.click();
  a.remove();
}

// ---- choosing a problem --------------------------------------------------------------------

async function choose(req) {
  state.request = req;
  state.touched.clear();
  state.seq++;
  $("sets").value = "";
  $("price-buy").value = $("price-rent").value = "";
  $("chart").hidden = true;
  try {
    showControls(await api("/api/inspect", { ...req, sets: [] }));
    showError("");
    await solve();
  } catch (e) {
    $("status").textContent = "error";
    $("status").className = "error";
    showError(e.message);
  }
}

async function start() {
  const examples = await api("/api/examples");
  const pick = $("example");
  pick.replaceChildren(...examples.map((x) => {
    const o = el("option", x.name);
    o.title = x.description;
    return o;
  }));
  pick.addEventListener("change", () => choose({ example: pick.value }));
  $("upload").addEventListener("change", async () => {
    const file = $("upload").files[0];
    if (!file) return;
    choose({ problem: await file.text(), source: file.name.slice(0, 100) });
  });
  for (const id of ["sets", "price-device", "price-buy", "price-rent"]) $(id).addEventListener("change", schedule);
  $("reset").addEventListener("click", () => choose(state.request));
  $("why").addEventListener("click", whyNot);
  $("chart-sweep").addEventListener("click", () => chart("sweep"));
  $("chart-frontier").addEventListener("click", () => chart("frontier"));
  $("chart-tco").addEventListener("click", () => chart("tco"));
  $("download-json").addEventListener("click", () =>
    download(`${state.result.plan.problem}-plan.json`, JSON.stringify(state.result.plan, null, 2) + "\n", "application/json"));
  $("download-md").addEventListener("click", () =>
    download(`${state.result.plan.problem}-memo.md`, state.result.markdown, "text/markdown"));
  const first = examples.find((x) => x.name === "chat-70b") || examples[0];
  if (first) {
    pick.value = first.name;
    choose({ example: first.name });
  } else {
    $("status").textContent = "no examples on this server: upload a problem file";
  }
}

document.addEventListener("DOMContentLoaded", start);
