import { createHash } from 'node:crypto'
import { SAXParser, type EndTag, type SaxToken, type StartTag, type Text } from 'parse5-sax-parser'
import { SECURE_SESSION_COOKIE, SESSION_COOKIE } from '../auth/types.js'

/**
 * `window.getServiceAuthToken()` for every served HTML page.
 *
 * The helper is one constant inline script: it reads the session cookie each time it is called, so
 * it answers `null` as soon as the session cookie is gone (logout clears it, the browser drops it
 * at expiry) without a reload, and the HTML itself never carries a token: it stays cacheable (ETag,
 * 304) and identical for every user. Being constant, the script is allowed by its SHA-256 hash in
 * `script-src`; no `'unsafe-inline'`, no nonce, no extra request.
 *
 * It reads `__Host-reaktor_session` when there is one (https, where nothing else can set it),
 * else `reaktor_session`. Several different values of that name mean one was planted (another
 * path or a parent domain), and a page cannot tell which: it answers `null` rather than a token
 * that may be an attacker's.
 */
export const HELPER_SCRIPT = [
  '(function(){',
  `var names=${JSON.stringify([SECURE_SESSION_COOKIE, SESSION_COOKIE])};`,
  'window.getServiceAuthToken=function(){',
  'var parts=document.cookie?document.cookie.split(";"):[];',
  'for(var n=0;n<names.length;n++){',
  'var found=null,seen=false;',
  'for(var i=0;i<parts.length;i++){',
  'var p=parts[i].replace(/^\\s+/,"");',
  'var eq=p.indexOf("=");',
  'if(eq<0||p.slice(0,eq)!==names[n])continue;',
  'var v=p.slice(eq+1);',
  'try{v=decodeURIComponent(v)}catch(e){}',
  'if(seen&&v!==found)return null;',
  'seen=true;found=v;',
  '}',
  'if(seen)return found===""?null:found;',
  '}',
  'return null};',
  '})();'
].join('')

const HELPER_DIGEST = createHash('sha256').update(HELPER_SCRIPT, 'utf8').digest()

/** The CSP source that allows exactly HELPER_SCRIPT. */
export const HELPER_SCRIPT_HASH = `'sha256-${HELPER_DIGEST.toString('base64')}'`

/** A short name of this helper, for validators of pages that carry it without being hashed whole. */
export const HELPER_SCRIPT_TAG = HELPER_DIGEST.toString('base64url').slice(0, 8)

const HELPER_TAG = Buffer.from(`<script>${HELPER_SCRIPT}</script>`, 'utf8')

/** What injectHelper adds to a page. */
export const HELPER_TAG_BYTES = HELPER_TAG.length

/** HTML's whitespace (a text token of only these is still part of the prologue). */
const HTML_WHITESPACE = /^[\t\n\f\r ]*$/

/**
 * Where the helper goes: right after the opening `<head>` tag, or, when the page has no `<head>`
 * tag, at the first thing after the document prologue (BOM, whitespace, comments, doctype,
 * `<html>`). Either way it precedes every script of the page. Not simply "offset 0": anything
 * before `<!DOCTYPE html>` would switch the page to quirks mode.
 *
 * The page is read by the HTML standard's tokenizer (parse5), as the browser reads it: a `>` inside
 * a quoted attribute value does not end the tag, and `<!-->` is a whole (empty) comment. The HTML
 * is given as latin1, which maps bytes 1:1, so the token offsets are byte offsets and UTF-8 content
 * passes through untouched. Input that ends inside the prologue (an unterminated comment, a cut
 * tag) puts the helper after the last complete token: the browser would swallow anything later.
 */
export function helperInsertionOffset (html: string): number {
  const bom = html.startsWith('\u00ef\u00bb\u00bf') ? 3 : 0 // UTF-8 BOM, seen through latin1
  let offset = bom
  let settled = false
  const parser = new SAXParser({ sourceCodeLocationInfo: true })
  const settle = (at: number): void => {
    if (settled) return
    settled = true
    offset = bom + at
    parser.stop()
  }
  const extend = (token: SaxToken): void => {
    if (!settled && token.sourceCodeLocation != null) offset = bom + token.sourceCodeLocation.endOffset
  }
  const start = (token: SaxToken): number => token.sourceCodeLocation?.startOffset ?? offset - bom
  parser.on('doctype', extend)
  parser.on('comment', extend)
  parser.on('text', (text: Text) => { if (HTML_WHITESPACE.test(text.text)) extend(text); else settle(start(text)) })
  parser.on('startTag', (tag: StartTag) => {
    if (tag.tagName === 'html') extend(tag)
    else if (tag.tagName === 'head') settle(tag.sourceCodeLocation?.endOffset ?? start(tag))
    else settle(start(tag))
  })
  parser.on('endTag', (tag: EndTag) => settle(start(tag)))
  // write() tokenizes synchronously. The input is never ended: what the tokenizer holds back until
  // the end (trailing text, an unterminated comment) would put the helper where it already is.
  parser.write(html.slice(bom))
  return offset
}

/** The page with the helper script injected before any of its own scripts. */
export function injectHelper (html: Buffer): Buffer {
  const offset = helperInsertionOffset(html.toString('latin1', 0, Math.min(html.length, 64 * 1024)))
  return Buffer.concat([html.subarray(0, offset), HELPER_TAG, html.subarray(offset)])
}
