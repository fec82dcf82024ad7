// What agents write, shown as people expect from a chat: Markdown rendered by markdown-it, code
// highlighted by highlight.js, and every HTML string sanitised by DOMPurify before it reaches the DOM.
//
// The libraries are vendored files of the package (static/vendor/, pinned and hashed in its
// manifest.json, fetched by scripts/vendor-console), so the console works offline and under its strict
// Content-Security-Policy: none of them needs eval or inline styles. Defence in depth: markdown-it runs
// with raw HTML off (agent HTML is shown as text), and DOMPurify keeps only the tags and attributes a
// Markdown rendering produces, links only with http(s) URLs (opened in a new tab, rel=noopener).

import MarkdownIt from "./vendor/markdown-it.esm.min.mjs";
import DOMPurify from "./vendor/purify.es.mjs";
import hljs from "./vendor/highlight.min.js";
import dockerfile from "./vendor/highlight-dockerfile.min.js";
import { definer as terraform } from "./vendor/highlightjs-terraform.js";

hljs.registerLanguage("dockerfile", dockerfile);
hljs.registerLanguage("terraform", terraform); // its aliases: tf, hcl

/** Code longer than this is shown unhighlighted (highlighting is linear, but not free). */
const MAX_HIGHLIGHT_CHARS = 200_000;
const WEB_URL = /^https?:\/\//i;
const KEPT_CLASS = /^(hljs|language-|align-)/;

const PURIFY = {
  ALLOWED_TAGS: [
    "a", "blockquote", "br", "code", "del", "em", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "li", "ol", "p",
    "pre", "s", "span", "strong", "sub", "sup", "table", "tbody", "td", "th", "thead", "tr", "ul",
  ],
  ALLOWED_ATTR: ["class", "href", "start", "title"],
  ALLOWED_URI_REGEXP: WEB_URL,
  ALLOW_DATA_ATTR: false,
  ALLOW_ARIA_ATTR: false,
  RETURN_DOM_FRAGMENT: true,
};

// Links: http(s) only, in a new tab without access to this page; anything else loses its href.
// Classes: only the ones markdown-it and highlight.js produce, so text cannot borrow the console's own.
DOMPurify.addHook("afterSanitizeAttributes", (node) => {
  if (node.hasAttribute("class")) {
    const kept = node.getAttribute("class").split(/\s+/).filter((name) => KEPT_CLASS.test(name));
    if (kept.length) node.setAttribute("class", kept.join(" "));
    else node.removeAttribute("class");
  }
  if (node.nodeName === "A") {
    const href = node.getAttribute("href");
    if (href && WEB_URL.test(href)) {
      node.setAttribute("target", "_blank");
      node.setAttribute("rel", "noopener noreferrer");
    } else {
      node.removeAttribute("href");
      node.setAttribute("title", "not a web link");
    }
  }
});

/** `html` as a DocumentFragment with only what Markdown needs: the one door from HTML text to the DOM. */
export function sanitize(html) {
  return DOMPurify.sanitize(html, PURIFY);
}

/** The highlight.js name for a fence's info string, a file name or a media type ("" when unknown). */
export function languageOf(hint) {
  const name = String(hint || "").trim().toLowerCase().split(/\s+/)[0] || "";
  if (!name) return "";
  if (hljs.getLanguage(name)) return name;
  const base = name.slice(name.lastIndexOf("/") + 1); // a path, or a media type's subtype
  if (base === "dockerfile") return "dockerfile";
  const suffix = base.includes(".") ? base.slice(base.lastIndexOf(".") + 1) : base.replace(/^x-/, "").split(/[+;]/)[0];
  const known = { yml: "yaml", tfvars: "terraform", sh: "bash", py: "python", js: "javascript", md: "markdown" };
  const candidate = known[suffix] || suffix;
  return candidate && hljs.getLanguage(candidate) ? candidate : "";
}

function highlightHtml(text, language) {
  if (!language || text.length > MAX_HIGHLIGHT_CHARS) return "";
  try {
    return hljs.highlight(text, { language, ignoreIllegals: true }).value;
  } catch {
    return "";
  }
}

/** A `<code>` holding `text`, highlighted as `language` when highlight.js knows it. */
export function codeElement(text, language) {
  const code = document.createElement("code");
  const html = highlightHtml(text, language);
  if (html) {
    code.className = `hljs language-${language}`;
    code.append(sanitize(html));
  } else {
    code.textContent = text;
  }
  return code;
}

const markdown = new MarkdownIt({
  html: false, // agent HTML is text, never markup
  linkify: true,
  breaks: false,
  highlight: (text, info) => highlightHtml(text, languageOf(info)),
});
markdown.enable(["table", "strikethrough"]);

// Images would load from anywhere (the CSP blocks most, a tracking pixel is still a request): a link instead.
markdown.renderer.rules.image = (tokens, index, options, env, self) => {
  const token = tokens[index];
  const label = self.renderInlineAsText(token.children || [], options, env) || token.attrGet("src");
  return `<a href="${markdown.utils.escapeHtml(token.attrGet("src") || "")}">${markdown.utils.escapeHtml(label)}</a>`;
};

// Column alignment as a class: markdown-it writes a style attribute, which the CSP (no unsafe-inline) refuses.
markdown.core.ruler.push("align_classes", (state) => {
  for (const token of state.tokens) {
    if (token.type !== "th_open" && token.type !== "td_open") continue;
    const match = /text-align:(left|center|right)/.exec(token.attrGet("style") || "");
    token.attrs = (token.attrs || []).filter(([name]) => name !== "style");
    if (match) token.attrJoin("class", `align-${match[1]}`);
  }
});

function copyText(text) {
  if (navigator.clipboard && window.isSecureContext) return navigator.clipboard.writeText(text);
  // Plain http on another host is not a secure context: the old way, through a hidden textarea.
  const area = document.createElement("textarea");
  area.value = text;
  area.setAttribute("readonly", "");
  area.className = "clipboard-scratch";
  document.body.append(area);
  area.select();
  const copied = document.execCommand("copy");
  area.remove();
  return copied ? Promise.resolve() : Promise.reject(new Error("copy refused"));
}

/** A button that puts `text()` on the clipboard, exactly (data-copied tells how it went). */
export function copyButton(text, label = "Copy") {
  const button = document.createElement("button");
  button.type = "button";
  button.className = "copy";
  button.textContent = label;
  button.addEventListener("click", async () => {
    try {
      await copyText(text());
      button.dataset.copied = "ok";
      button.textContent = "Copied";
    } catch {
      button.dataset.copied = "failed";
      button.textContent = "Copy failed";
    }
    setTimeout(() => {
      button.textContent = label;
    }, 1500);
  });
  return button;
}

/** `pre` framed with a header: the language, a copy button and any `extras` (e.g. a download link). */
export function codeFrame(pre, language, ...extras) {
  const head = document.createElement("div");
  head.className = "code-head";
  const name = document.createElement("span");
  name.className = "code-lang";
  name.textContent = language || "text";
  const code = pre.querySelector("code") || pre;
  head.append(name, ...extras, copyButton(() => code.textContent));
  const frame = document.createElement("div");
  frame.className = "code-block";
  frame.append(head, pre);
  return frame;
}

/** Markdown `text` as sanitised DOM: code blocks framed with a copy button, tables scrollable. */
export function renderMarkdown(text) {
  const fragment = sanitize(markdown.render(text));
  for (const pre of fragment.querySelectorAll("pre")) {
    const code = pre.querySelector("code");
    const language = code ? (/(?:^|\s)language-(\S+)/.exec(code.className) || [])[1] || "" : "";
    if (code && language) code.classList.add("hljs");
    const marker = document.createTextNode("");
    pre.replaceWith(marker);
    marker.replaceWith(codeFrame(pre, language));
  }
  for (const table of fragment.querySelectorAll("table")) {
    const wrap = document.createElement("div");
    wrap.className = "table-wrap";
    table.replaceWith(wrap);
    wrap.append(table);
  }
  for (const node of [...fragment.childNodes]) {
    if (node.nodeType === Node.TEXT_NODE && !node.textContent.trim()) node.remove(); // newlines between blocks
  }
  return fragment;
}
