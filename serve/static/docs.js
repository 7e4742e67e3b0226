// Interactive page for /api/openapi.json: one form per operation, answers shown in place.
"use strict";

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  for (const c of children) node.append(c);
  return node;
}

function example(schema) {
  const body = {};
  for (const [name, prop] of Object.entries(schema.properties || {})) {
    if ((schema.required || []).includes(name)) {
      body[name] = prop.type === "integer" ? (prop.minimum ?? 0) : "";
    }
  }
  return JSON.stringify(body, null, 2);
}

function operation(path, method, op) {
  const box = el("details");
  const lock = op.security ? el("span", {class: "lock", title: "needs a key"}, " [key]") : "";
  box.append(el("summary", {},
    el("span", {class: "method " + method.toUpperCase()}, method.toUpperCase()),
    el("span", {class: "path"}, path), lock, " ", op.summary || ""));
  const inputs = {};
  for (const p of op.parameters || []) {
    const input = el("input", {placeholder: p.schema.default ?? ""});
    inputs[p.name] = [p.in, input];
    const hint = p.description ? " (" + p.description + ")" : "";
    box.append(el("label", {}, p.name + " [" + p.in + "]" + hint, input));
  }
  let bodyBox = null;
  const content = op.requestBody && op.requestBody.content["application/json"];
  if (content) {
    bodyBox = el("textarea");
    bodyBox.value = example(content.schema);
    const fields = Object.entries(content.schema.properties || {})
      .map(([n, s]) => n + ": " + (s.type || "any JSON") + (s.description ? " - " + s.description : ""))
      .join("; ");
    box.append(el("label", {}, "JSON body (" + fields + ")", bodyBox));
  }
  const status = el("span", {class: "status"});
  const out = el("pre");
  const send = el("button", {}, "Send");
  send.addEventListener("click", async () => {
    let url = path;
    const query = new URLSearchParams();
    for (const [name, [where, input]] of Object.entries(inputs)) {
      if (where === "path") url = url.replace("{" + name + "}", encodeURIComponent(input.value));
      else if (input.value !== "") query.set(name, input.value);
    }
    if ([...query].length) url += "?" + query;
    const headers = {};
    const key = document.getElementById("key").value.trim();
    if (key) headers["X-API-Key"] = key;
    const init = {method: method.toUpperCase(), headers};
    if (bodyBox) { headers["Content-Type"] = "application/json"; init.body = bodyBox.value; }
    status.textContent = "...";
    try {
      const res = await fetch(url, init);
      const text = await res.text();
      status.textContent = res.status + " " + res.statusText;
      try { out.textContent = JSON.stringify(JSON.parse(text), null, 2); }
      catch (e) { out.textContent = text.slice(0, 4000); }
    } catch (e) {
      status.textContent = "network error";
      out.textContent = String(e);
    }
  });
  const answers = Object.entries(op.responses || {})
    .map(([code, r]) => code + " " + r.description).join("; ");
  box.append(el("p", {}, "Answers: " + answers), send, " ", status, out);
  return box;
}

async function main() {
  const main = document.getElementById("operations");
  const spec = await (await fetch("/api/openapi.json")).json();
  document.getElementById("title").textContent = spec.info.title;
  document.getElementById("description").textContent = spec.info.description;
  main.textContent = "";
  const groups = {};
  for (const [path, ops] of Object.entries(spec.paths)) {
    for (const [method, op] of Object.entries(ops)) {
      const tag = (op.tags || ["other"])[0];
      (groups[tag] = groups[tag] || []).push(operation(path, method, op));
    }
  }
  for (const [tag, boxes] of Object.entries(groups)) {
    main.append(el("h2", {}, tag), ...boxes);
  }
}

main().catch((e) => {
  document.getElementById("operations").textContent = "Could not load the schema: " + e;
});
