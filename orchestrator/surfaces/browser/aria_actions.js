// What a ref of corral's snapshot (aria_snapshot.js) points at, and the DOM side of the
// actions on it, in the same isolated world of the gateway's own. Evaluated as
// `(SOURCE)(request)`, awaited; request: {op, ref, ...}. Every answer is JSON:
// {error} (the ref is gone: the agent takes a new snapshot), {wait} (not actionable yet:
// the caller asks again until its deadline), or the op's own answer.
async (request) => {
  const state = globalThis.__corralAria;
  const el = state && state.byRef.get(request.ref);
  if (!el || !el.isConnected) return { error: "gone" };
  // the next frame drawn (or 100 ms: a page in the background draws none)
  const frame = () => new Promise((done) => { requestAnimationFrame(() => done()); setTimeout(done, 100); });

  // an iframe's content box in its document's viewport, and the scale it draws its
  // document at (a CSS transform on the way)
  function contentBox(owner) {
    const box = owner.getBoundingClientRect();
    const style = getComputedStyle(owner);
    const px = (name) => parseFloat(style[name]) || 0;
    const left = box.left + px("borderLeftWidth") + px("paddingLeft");
    const top = box.top + px("borderTopWidth") + px("paddingTop");
    const width = box.width - px("borderLeftWidth") - px("borderRightWidth")
      - px("paddingLeft") - px("paddingRight");
    return { left, top, scale: width / (owner.clientWidth || 1) || 1 };
  }

  // the element's box in this world's document (the top of this renderer's frames),
  // through every iframe of this renderer it is in
  function topRect(node) {
    const own = node.getBoundingClientRect();
    let x = own.left, y = own.top, w = own.width, h = own.height;
    let win = node.ownerDocument.defaultView;
    while (win && win !== window && win.frameElement) {
      const box = contentBox(win.frameElement);
      x = box.left + x * box.scale; y = box.top + y * box.scale; w *= box.scale; h *= box.scale;
      win = win.frameElement.ownerDocument.defaultView;
    }
    return { x, y, width: w, height: h };
  }

  // the element a click at (x, y) of this world's document reaches: through open shadow
  // roots and this renderer's iframes (an iframe of another renderer is the answer)
  function hitAt(x, y) {
    let root = document, hit = null;
    for (let depth = 0; depth < 64; depth++) {
      hit = root.elementFromPoint(x, y);
      if (!hit) return null;
      if (hit.shadowRoot && hit.shadowRoot !== root) { root = hit.shadowRoot; continue; }
      if (hit.tagName === "IFRAME" || hit.tagName === "FRAME") {
        let inner = null;
        try { inner = hit.contentDocument; } catch (e) { inner = null; }
        if (inner) {
          const box = contentBox(hit);
          x = (x - box.left) / box.scale; y = (y - box.top) / box.scale; root = inner;
          continue;
        }
      }
      return hit;
    }
    return hit;
  }

  // whether `hit` is `node` or inside it (across shadow roots)
  function within(hit, node) {
    for (let at = hit; at; ) {
      if (at === node) return true;
      at = at.parentNode instanceof ShadowRoot ? at.parentNode.host : at.parentNode;
    }
    return false;
  }

  function disabled(node) {
    return Boolean(node.disabled) || node.getAttribute("aria-disabled") === "true"
      || Boolean(node.closest && node.closest("fieldset[disabled]"));
  }

  if (request.op === "point") {
    if (!el.checkVisibility({ visibilityProperty: true })) return { wait: "it is not visible" };
    if (request.enabled && disabled(el)) return { wait: "it is disabled" };
    el.scrollIntoView({ block: "nearest", inline: "nearest", behavior: "instant" });
    const before = el.getBoundingClientRect();
    if (before.width === 0 || before.height === 0) return { wait: "it has no size" };
    await frame();
    const after = el.getBoundingClientRect();
    if (before.x !== after.x || before.y !== after.y || before.width !== after.width) {
      return { wait: "it is moving" };
    }
    const top = topRect(el);
    const x = top.x + top.width / 2, y = top.y + top.height / 2;
    if (!within(hitAt(x, y), el)) return { wait: "another element would receive the click" };
    return { x, y };
  }

  if (request.op === "hit") {  // `el` an iframe: whether a click at (x, y) reaches it
    return { hits: within(hitAt(request.x, request.y), el) };
  }

  if (request.op === "fill") {
    const tag = el.tagName;
    const type = (el.getAttribute("type") || "text").toLowerCase();
    const editable = tag === "TEXTAREA" || el.isContentEditable
      || (tag === "INPUT" && !["checkbox", "radio", "button", "submit", "reset", "image", "file", "hidden"].includes(type));
    if (!editable) return { error: "not editable" };
    if (!el.checkVisibility({ visibilityProperty: true })) return { wait: "it is not visible" };
    if (disabled(el) || el.readOnly) return { wait: "it is not editable now" };
    if (tag === "INPUT" && ["date", "time", "datetime-local", "month", "week", "color", "range"].includes(type)) {
      el.focus();
      el.value = request.text;
      if (el.value !== request.text) return { error: `the ${type} field refuses that value` };
      el.dispatchEvent(new Event("input", { bubbles: true, composed: true }));
      el.dispatchEvent(new Event("change", { bubbles: true }));
      return { done: true };
    }
    el.focus();
    if (tag === "INPUT" || tag === "TEXTAREA") el.select();
    else {
      const range = el.ownerDocument.createRange();
      range.selectNodeContents(el);
      const selection = el.ownerDocument.defaultView.getSelection();
      selection.removeAllRanges();
      selection.addRange(range);
    }
    return { type: true };
  }

  if (request.op === "select") {
    if (el.tagName !== "SELECT") return { error: "not a select" };
    if (disabled(el)) return { wait: "it is disabled" };
    const wanted = [...el.options].filter((o) => o.label === request.option || o.text.trim() === request.option);
    if (!wanted.length) return { error: "no such option" };
    for (const option of el.options) option.selected = option === wanted[0];
    el.dispatchEvent(new Event("input", { bubbles: true, composed: true }));
    el.dispatchEvent(new Event("change", { bubbles: true }));
    return { chosen: 1 };
  }

  if (request.op === "read") {
    const top = topRect(el);
    return {
      text: (el.textContent || "").replace(/\s+/g, " ").trim().slice(0, 500),
      label: el.getAttribute("aria-label"),
      value: el.getAttribute("value"),
      href: el.getAttribute("href"),
      bounds: [Math.round(top.x), Math.round(top.y), Math.round(top.width), Math.round(top.height)],
    };
  }
  return { error: "unknown op" };
}
