import { createHash } from 'node:crypto'
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

/** The CSP source that allows exactly HELPER_SCRIPT. */
export const HELPER_SCRIPT_HASH = `'sha256-${createHash('sha256').update(HELPER_SCRIPT, 'utf8').digest('base64')}'`

const HELPER_TAG = Buffer.from(`<script>${HELPER_SCRIPT}</script>`, 'utf8')

/**
 * Where the helper goes: right after the opening `<head>` tag, or, when the page has no `<head>`
 * tag, at the first thing after the document prologue (BOM, whitespace, comments, doctype,
 * `<html>`). Either way it precedes every script of the page. Not simply "offset 0": anything
 * before `<!DOCTYPE html>` would switch the page to quirks mode.
 *
 * The HTML is scanned as latin1, which maps bytes 1:1, so UTF-8 content passes through untouched.
 */
export function helperInsertionOffset (html: string): number {
  let i = 0
  if (html.startsWith('\u00ef\u00bb\u00bf')) i = 3 // UTF-8 BOM, seen through latin1
  for (;;) {
    while (i < html.length && /\s/.test(html[i])) i++
    if (html.startsWith('<!--', i)) {
      const end = html.indexOf('-->', i + 4)
      if (end === -1) return i
      i = end + 3
      continue
    }
    const tag = /^<(!doctype|html|head)(?=[\s/>])[^>]*>/i.exec(html.slice(i, i + 4096))
    if (tag === null) return i
    i += tag[0].length
    if (tag[1].toLowerCase() === 'head') return i
  }
}

/** The page with the helper script injected before any of its own scripts. */
export function injectHelper (html: Buffer): Buffer {
  const offset = helperInsertionOffset(html.toString('latin1', 0, Math.min(html.length, 64 * 1024)))
  return Buffer.concat([html.subarray(0, offset), HELPER_TAG, html.subarray(offset)])
}
