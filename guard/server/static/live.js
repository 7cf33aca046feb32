"use strict";
const PALETTE = __PALETTE__;
const SHAPES = ["circle", "square", "diamond", "triangle"];
const state = {sessions: new Map(), shapes: new Map()};
const $ = (id) => document.getElementById(id);
function color(i) {
  const base = PALETTE[i % PALETTE.length], shade = Math.floor(i / PALETTE.length) % 3;
  return shade === 0 ? base : `color-mix(in srgb, ${base} 62%, ${shade === 1 ? "white" : "black"})`;
}
function el(tag, attrs, ...kids) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "text") node.textContent = v; else node.setAttribute(k, v);
  }
  for (const kid of kids) if (kid) node.append(kid);
  return node;
}
function human(n) { return n < 1000 ? String(n) : n < 1e6 ? (n / 1e3).toFixed(1) + "k" : (n / 1e6).toFixed(1) + "M"; }
function shapeOf(policy) {
  if (!state.shapes.has(policy)) state.shapes.set(policy, SHAPES[state.shapes.size % SHAPES.length]);
  return state.shapes.get(policy);
}
function card(label, value, note) {
  return el("div", {class: "card"}, el("div", {class: "lbl", text: label}), el("div", {class: "big", text: value}),
    note ? el("div", {class: "stats", text: note}) : null);
}
function options(select, values, all) {
  const chosen = select.value;
  select.replaceChildren(el("option", {value: "", text: all}), ...values.map((v) => el("option", {value: v, text: v})));
  select.value = values.includes(chosen) ? chosen : "";
}
function visible(s) {
  const want = {s: $("f-session").value, r: $("f-runtime").value, a: $("f-action").value};
  if (want.s && s.id !== want.s) return false;
  if (want.r && s.runtime !== want.r) return false;
  if (want.a && !s.actions[want.a]) return false;
  return true;
}
function timeline(s) {
  const marks = new Map();
  for (const m of s.marks) { if (!marks.has(m[0])) marks.set(m[0], []); marks.get(m[0]).push(m); }
  const rows = s.agents.map(() => []);
  s.cells.forEach((cell, n) => {
    const [row, sig, err, size] = cell, sg = s.signatures[sig], repeated = sg && sg[2] > 1;
    const tip = [`call ${n + 1} · ${sg ? sg[0] + " " + sg[1] : ""} · ${size} B${err ? " · error" : ""}`];
    const node = el("div", {class: err ? "c err" : "c"});
    if (repeated) node.style.backgroundColor = color(sig);
    (marks.get(n) || []).slice(0, 4).forEach((m, level) => {
      tip.push(`${m[1]}: ${m[7] ? "shadow " : ""}${m[2]} — ${m[3].slice(0, 200)}`);
      node.append(el("i", {class: `m${level} ${shapeOf(m[1])} ${m[2]}${m[7] ? " shadow" : ""}`,
        "data-action": m[7] ? "shadow " + m[2] : m[2]}));
    });
    node.title = tip.join("\n");
    rows[row].push(node);
  });
  const out = el("div", {class: "timeline"});
  s.agents.forEach((agent, i) => {
    if (rows[i].length) out.append(el("div", {class: "agent"}, el("div", {class: "who", title: agent, text: agent}),
      el("div", {class: "cells"}, ...rows[i])));
  });
  if (s.calls > s.cells.length) out.append(el("div", {class: "more", text: `${s.calls - s.cells.length} more calls not drawn`}));
  if (!s.cells.length) out.append(el("div", {class: "none", text: "No tool calls yet."}));
  return out;
}
function actionsList(s) {
  const box = el("div", {class: "acts"}, el("h3", {text: "guard actions"}));
  if (!s.marks.length) box.append(el("div", {class: "none", text: "No action yet: nothing was repeated enough."}));
  for (const m of s.marks.slice(-50).reverse()) {
    box.append(el("div", {class: "act" + (m[7] ? " shadow" : ""), "data-action": m[7] ? "shadow " + m[2] : m[2]},
      el("i", {class: `key ${shapeOf(m[1])} ${m[2]}`}),
      el("div", {}, el("b", {text: `${m[1]}: ${m[7] ? "shadow " : ""}${m[2]}`}),
        el("span", {class: "stats", text: ` · ${m[5]} ×${m[6]} · call ${m[0] + 1} · agent ${m[4] || "?"}`}),
        el("div", {class: "txt", text: m[3]}))));
  }
  return box;
}
function actedOf(s) {  // every action the session had, not only the latest kept in marks
  return Object.entries(s.actions).reduce((n, [kind, count]) => n + (kind.startsWith("shadow ") ? 0 : count), 0);
}
function section(s) {
  const acted = actedOf(s);
  const head = el("div", {class: "shead"}, el("h2", {text: s.id}),
    el("span", {class: "badge", text: s.runtime}), s.project ? el("span", {class: "badge", text: s.project}) : null,
    el("span", {class: "stats", text: `${s.calls} calls · ${s.repeats} repeats · ${s.agents.length} agent${s.agents.length === 1 ? "" : "s"}`}));
  if (acted) head.append(el("span", {class: "badge hot", text: `${acted} guard action${acted === 1 ? "" : "s"}`}));
  if (s.wasted_calls) head.append(el("span", {class: "badge hot", text: `${s.wasted_calls} calls wasted, ~${human(s.wasted_tokens)} tokens`}));
  if (s.saved_calls) head.append(el("span", {class: "badge", text: `saved ${s.saved_calls} calls, ~${human(s.saved_tokens)} tokens`}));
  return el("section", {class: "session", "data-session": s.id, "data-runtime": s.runtime},
    head, el("div", {class: "sbody"}, timeline(s), actionsList(s)));
}
function render() {
  const all = [...state.sessions.values()].sort((a, b) => b.updated - a.updated);
  options($("f-session"), all.map((s) => s.id), "every session");
  options($("f-runtime"), [...new Set(all.map((s) => s.runtime))].sort(), "every runtime");
  options($("f-action"), [...new Set(all.flatMap((s) => Object.keys(s.actions)))].sort(), "any action");
  const sum = (f) => all.reduce((n, s) => n + f(s), 0);
  $("cards").replaceChildren(card("sessions", String(all.length)), card("tool calls", sum((s) => s.calls).toLocaleString()),
    card("repeats", sum((s) => s.repeats).toLocaleString()),
    card("guard actions", String(sum(actedOf))),
    card("calls wasted", sum((s) => s.wasted_calls).toLocaleString(), `~${human(sum((s) => s.wasted_tokens))} tokens, estimated`),
    card("saved", `${sum((s) => s.saved_calls)} calls`, `~${human(sum((s) => s.saved_tokens))} tokens, estimated`));
  const shown = all.filter(visible);
  $("sessions").replaceChildren(...shown.map(section));
  if (!shown.length) $("sessions").append(el("div", {class: "card none",
    text: all.length ? "No session matches the filters." : "No session yet: the page fills in as hooks arrive."}));
  $("legend-policies").replaceChildren(...[...state.shapes].map(([p, shape]) => el("span", {}, el("i", {class: `key ${shape} halt`}), p)));
}
let pending = false;
function later() { if (!pending) { pending = true; requestAnimationFrame(() => { pending = false; render(); }); } }
for (const id of ["f-session", "f-runtime", "f-action"]) $(id).addEventListener("change", render);
const source = new EventSource("live/events");
source.addEventListener("snapshot", (e) => {
  state.sessions.clear();
  for (const s of JSON.parse(e.data).sessions) state.sessions.set(s.id, s);
  document.body.classList.add("on"); document.body.dataset.connected = "1"; $("status").textContent = "live";
  render();
});
source.addEventListener("session", (e) => { const s = JSON.parse(e.data); state.sessions.set(s.id, s); later(); });
source.onerror = () => {
  document.body.classList.remove("on"); document.body.dataset.connected = "0";
  // refused (too many pages open, the token gone): the browser does not try again
  $("status").textContent = source.readyState === EventSource.CLOSED ? "refused by the server: reload to try again" : "reconnecting…";
};
render();
