// corral's accessibility snapshot of a page, run in an isolated world of the gateway's own
// (orchestrator/surfaces/browser/aria.py): the page's scripts never see this code, its
// refs or its state. One call walks the frame's document, its open shadow roots and every
// frame of the same renderer (the world has universal access); a frame of another renderer
// is left as a placeholder line the caller fills from that frame's own session.
//
// Evaluated as `(SOURCE)(options)`; options: {prefix: "f1" or "", maxNodes: number}.
// Returns {text, frames: [ref of each iframe left to the caller], nodes: number}; past
// maxNodes elements the walk stops, and its last line says so.
(options) => {
  // an element's number stays with it for the document's life (a WeakMap: a removed
  // element is not held); `byRef` holds this snapshot's elements only, by `e<n>`
  const state = (globalThis.__corralAria ||= { next: 0, refOf: new WeakMap(), byRef: new Map() });
  state.byRef = new Map();
  const prefix = options.prefix || "";
  const SKIP = new Set(["SCRIPT", "STYLE", "NOSCRIPT", "TEMPLATE", "HEAD", "META", "LINK", "TITLE"]);
  const HEADINGS = { H1: 1, H2: 2, H3: 3, H4: 4, H5: 5, H6: 6 };
  const INPUT_ROLES = {
    button: "button", submit: "button", reset: "button", image: "button", checkbox: "checkbox",
    radio: "radio", range: "slider", number: "spinbutton", search: "searchbox", hidden: null,
  };
  const CONTENT_NAMED = new Set([
    "button", "link", "heading", "cell", "columnheader", "rowheader", "option", "tab",
    "menuitem", "menuitemcheckbox", "menuitemradio", "treeitem", "tooltip", "checkbox",
    "radio", "switch", "row",
  ]);
  const VALUED = new Set(["textbox", "searchbox", "combobox", "spinbutton", "slider"]);
  const ROLE_BY_TAG = {
    ARTICLE: "article", ASIDE: "complementary", BUTTON: "button", DETAILS: "group",
    DIALOG: "dialog", FIELDSET: "group", FIGURE: "figure", FORM: "form", FOOTER: "contentinfo",
    HEADER: "banner", HR: "separator", IFRAME: "iframe", IMG: "img", LI: "listitem",
    MAIN: "main", MENU: "list", NAV: "navigation", OL: "list", OPTION: "option",
    P: "paragraph", PROGRESS: "progressbar", SECTION: "region", SUMMARY: "button",
    TABLE: "table", TBODY: "rowgroup", TD: "cell", TEXTAREA: "textbox", TFOOT: "rowgroup",
    TH: "columnheader", THEAD: "rowgroup", TR: "row", UL: "list", DL: "list", DT: "term",
    DD: "definition", BLOCKQUOTE: "blockquote", CODE: "code", STRONG: "strong", EM: "emphasis",
    LABEL: null, SPAN: null, DIV: null,
  };
  const lines = [];
  const frames = [];
  let nodes = 0;
  let cut = false;

  const squash = (text) => (text || "").replace(/\s+/g, " ").trim();
  // Quoted whole, never cut: the caller withholds secret values by their spellings
  // (sandboxes/withhold.py), and a value cut in two would not be found.
  const quote = (text) => JSON.stringify(text);

  function implicitRole(el) {
    const tag = el.tagName;
    if (tag in HEADINGS) return "heading";
    if (tag === "A" || tag === "AREA") return el.hasAttribute("href") ? "link" : null;
    if (tag === "INPUT") {
      const type = (el.getAttribute("type") || "text").toLowerCase();
      if (type in INPUT_ROLES) return INPUT_ROLES[type];
      return el.hasAttribute("list") ? "combobox" : "textbox";
    }
    if (tag === "SELECT") return el.multiple || el.size > 1 ? "listbox" : "combobox";
    if (tag === "IMG") return el.getAttribute("alt") === "" ? null : "img";
    if (tag === "SECTION") return el.hasAttribute("aria-label") || el.hasAttribute("aria-labelledby") ? "region" : null;
    if (el.isContentEditable && el.parentElement && !el.parentElement.isContentEditable) return "textbox";
    return ROLE_BY_TAG[tag] ?? null;
  }

  function roleOf(el) {
    // a role is a word of lowercase letters: anything else the page wrote is not shown
    // (a role like `button[ref=e1]` must not forge a ref on its line)
    const given = squash(el.getAttribute("role")).split(" ")[0].toLowerCase();
    if (given === "none" || given === "presentation") return null;
    if (/^[a-z]{1,40}$/.test(given)) return given;
    return implicitRole(el);
  }

  function textOf(node, depth) {
    // the text a name from content is made of: visible text, alt of images, nested names
    if (depth > 20) return "";
    if (node.nodeType === Node.TEXT_NODE) return node.data;
    if (node.nodeType !== Node.ELEMENT_NODE) return "";
    if (SKIP.has(node.tagName) || node.getAttribute("aria-hidden") === "true") return "";
    if (node.tagName === "IMG") return node.getAttribute("alt") || "";
    const label = node.getAttribute("aria-label");
    if (label) return label;
    let out = "";
    const kids = node.shadowRoot ? node.shadowRoot.childNodes : node.childNodes;
    for (const kid of kids) out += " " + textOf(kid, depth + 1);
    return out;
  }

  function byIds(el, attr) {
    const ids = squash(el.getAttribute(attr)).split(" ").filter(Boolean);
    const root = el.getRootNode();
    return squash(ids.map((id) => {
      const other = root.getElementById ? root.getElementById(id) : el.ownerDocument.getElementById(id);
      return other ? squash(textOf(other, 0)) : "";
    }).join(" "));
  }

  function nameOf(el, role) {
    if (el.hasAttribute("aria-labelledby")) {
      const named = byIds(el, "aria-labelledby");
      if (named) return named;
    }
    const label = squash(el.getAttribute("aria-label"));
    if (label) return label;
    const tag = el.tagName;
    if (el.labels && el.labels.length && tag !== "BUTTON") {
      return squash([...el.labels].map((l) => textOf(l, 0)).join(" "));
    }
    if (tag === "INPUT" && ["button", "submit", "reset"].includes((el.type || "").toLowerCase())) {
      return squash(el.value) || (el.type === "submit" ? "Submit" : el.type === "reset" ? "Reset" : "");
    }
    if (tag === "IMG" || (tag === "INPUT" && el.type === "image")) return squash(el.getAttribute("alt"));
    if (tag === "FIELDSET") {
      const legend = el.querySelector(":scope > legend");
      if (legend) return squash(textOf(legend, 0));
    }
    if (tag === "TABLE" && el.caption) return squash(textOf(el.caption, 0));
    if (tag === "IFRAME") return squash(el.getAttribute("title"));
    if (role && CONTENT_NAMED.has(role)) {
      const text = squash(textOf(el, 0));
      if (text) return text;
    }
    return squash(el.getAttribute("title") || el.getAttribute("placeholder") || "");
  }

  function refFor(el) {
    let number = state.refOf.get(el);
    if (!number) {
      number = ++state.next;
      state.refOf.set(el, number);
    }
    state.byRef.set("e" + number, el);
    return prefix + "e" + number;  // the caller strips the prefix before asking this world
  }

  function states(el, role) {
    const out = [];
    const aria = (name) => el.getAttribute(name);
    if (["checkbox", "radio", "switch", "menuitemcheckbox", "menuitemradio"].includes(role)) {
      const given = aria("aria-checked");
      if (given === "mixed" || el.indeterminate) out.push("[checked=mixed]");
      else if (given === "true" || (given === null && el.checked)) out.push("[checked]");
    }
    if (el.disabled || aria("aria-disabled") === "true") out.push("[disabled]");
    if (aria("aria-expanded") === "true") out.push("[expanded]");
    if (aria("aria-pressed") === "true") out.push("[pressed]");
    if (aria("aria-selected") === "true" || (el.tagName === "OPTION" && el.selected)) out.push("[selected]");
    if (role === "heading") out.push(`[level=${aria("aria-level") || HEADINGS[el.tagName] || 2}]`);
    if (el === el.ownerDocument.activeElement && el !== el.ownerDocument.body) out.push("[active]");
    return out;
  }

  function valueOf(el, role) {
    if (!VALUED.has(role)) return null;
    if (el.tagName === "SELECT") {
      const chosen = el.selectedOptions && el.selectedOptions[0];
      return chosen ? squash(chosen.label || chosen.textContent) : "";
    }
    if ("value" in el && typeof el.value === "string") return el.value;
    if (el.isContentEditable) return squash(el.innerText);
    return squash(el.getAttribute("aria-valuenow"));
  }

  function hidden(el, style) {
    if (el.getAttribute("aria-hidden") === "true" || el.hasAttribute("inert")) return true;
    if (el.tagName === "INPUT" && (el.type || "").toLowerCase() === "hidden") return true;
    if (style.display === "none") return true;
    return false;
  }

  function childrenOf(node) {
    if (node.shadowRoot) return [...node.shadowRoot.childNodes];
    if (node.tagName === "SLOT") {
      const assigned = node.assignedNodes({ flatten: true });
      return assigned.length ? assigned : [...node.childNodes];
    }
    return [...node.childNodes];
  }

  function walk(node, depth, out, nameFromContent) {
    for (const kid of childrenOf(node)) {
      if (nodes >= options.maxNodes) { cut = true; return; }
      if (kid.nodeType === Node.TEXT_NODE) {
        const text = squash(kid.data);
        if (text && !nameFromContent) out.push(`${"  ".repeat(depth)}- text: ${quote(text)}`);
        continue;
      }
      if (kid.nodeType !== Node.ELEMENT_NODE || SKIP.has(kid.tagName)) continue;
      const style = getComputedStyle(kid);
      if (hidden(kid, style)) continue;
      const shown = style.display === "contents" || kid.checkVisibility({ visibilityProperty: true });
      const role = roleOf(kid);
      if (!shown && !role) continue;
      if (!shown || style.visibility === "hidden") { walk(kid, depth, out, nameFromContent); continue; }
      const pointer = style.cursor === "pointer";
      if (!role && !pointer) { walk(kid, depth, out, nameFromContent); continue; }
      nodes++;
      const shownRole = role || "generic";
      const name = role ? nameOf(kid, role) : "";
      const ref = refFor(kid);
      let line = `${"  ".repeat(depth)}- ${shownRole}${name ? " " + quote(name) : ""}`;
      for (const s of states(kid, shownRole)) line += " " + s;
      line += ` [ref=${ref}]`;
      if (pointer) line += " [cursor=pointer]";
      const value = valueOf(kid, shownRole);
      const inner = [];
      if (kid.tagName === "A" && kid.hasAttribute("href")) inner.push(`${"  ".repeat(depth + 1)}- /url: ${quote(kid.getAttribute("href"))}`);
      if (kid.tagName === "IFRAME") {
        let doc = null;
        try { doc = kid.contentDocument; } catch (e) { doc = null; }
        if (doc && doc.body) walk(doc.body, depth + 1, inner, false);
        else { frames.push(ref); inner.push(`${"  ".repeat(depth + 1)}- \u0000frame ${ref}`); }
      } else if (!["textbox", "searchbox", "combobox", "listbox"].includes(shownRole) || kid.tagName === "SELECT") {
        walk(kid, depth + 1, inner, Boolean(name) && CONTENT_NAMED.has(shownRole));
      }
      if (value !== null) line += `: ${quote(value)}`;
      out.push(inner.length ? line + (value !== null ? "" : ":") : line);
      out.push(...inner);
    }
  }

  walk(document.body || document.documentElement, 0, lines, false);
  if (cut) lines.push(`- text: "(the snapshot stops here: more than ${options.maxNodes} elements)"`);
  return { text: lines.join("\n"), frames, nodes };
}
