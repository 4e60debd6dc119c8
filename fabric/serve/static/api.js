// The API reference: every operation of /openapi.json (the document the service serves and the tests check against
// its validators), with its parameters, request body fields and responses, rendered as text.
"use strict";

const el = (tag, text, cls) => {
  const node = document.createElement(tag);
  if (text !== undefined) node.textContent = text;
  if (cls) node.className = cls;
  return node;
};

function resolve(doc, schema) {
  let seen = 0;
  while (schema && schema.$ref && seen++ < 10) {
    schema = schema.$ref.replace(/^#\//, "").split("/").reduce((node, part) => node && node[part], doc);
  }
  return schema || {};
}

function fields(doc, schema) {
  const resolved = resolve(doc, schema);
  const list = el("ul");
  const required = new Set(resolved.required || []);
  for (const [name, prop] of Object.entries(resolved.properties || {})) {
    const p = resolve(doc, prop);
    const kind = p.type || (p.enum ? "enum" : p.anyOf ? "one of several" : "object");
    const values = p.enum ? ` (${p.enum.join(", ")})` : "";
    list.append(el("li", `${name}${required.has(name) ? " (required)" : ""}: ${kind}${values}${p.description ? " — " + p.description : ""}`));
  }
  return list;
}

async function main() {
  const doc = await (await fetch("/openapi.json")).json();
  document.getElementById("info").textContent = `${doc.info.title} ${doc.info.version} · OpenAPI ${doc.openapi}`;
  const box = document.getElementById("operations");
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(item)) {
      if (typeof op !== "object" || !op.responses) continue;
      const section = el("section", undefined, "operation");
      section.append(el("h2", `${method.toUpperCase()} ${path}`));
      if (op.summary) section.append(el("p", op.summary));
      if (op.description) section.append(el("p", op.description));
      for (const param of op.parameters || []) {
        section.append(el("p", `parameter ${param.name} (${param.in}${param.required ? ", required" : ""})${param.description ? ": " + param.description : ""}`));
      }
      const body = op.requestBody && op.requestBody.content && op.requestBody.content["application/json"];
      if (body) { section.append(el("h3", "request body")); section.append(fields(doc, body.schema)); }
      section.append(el("h3", "responses"));
      const answers = el("ul");
      for (const [code, resp] of Object.entries(op.responses)) answers.append(el("li", `${code}: ${resp.description || ""}`));
      section.append(answers);
      box.append(section);
    }
  }
}

main().catch((exc) => { document.getElementById("info").textContent = `could not read /openapi.json: ${exc}`; });
