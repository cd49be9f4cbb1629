import fs from 'node:fs'
import { createRequire } from 'node:module'
import js from '@eslint/js'
import tseslint from 'typescript-eslint'

// The browser code of the apps (the template of `reaktor new-app --ui` in reaktor-apps/.new-app too).
const BROWSER_JS = ['reaktor-apps/*/public/**/*.js']

/**
 * The browser's globals as the type check of that code knows them (TypeScript's DOM library,
 * reaktor-apps/tsconfig.json): one list for both checkers, not a second one kept by hand here.
 */
const BROWSER_GLOBALS = Object.fromEntries(
  [...fs.readFileSync(createRequire(import.meta.url).resolve('typescript/lib/lib.dom.d.ts'), 'utf8')
    .matchAll(/^declare (?:var|const|function|namespace) (\w+)/gm)]
    .map(([, name]) => [name, 'readonly']))

export default tseslint.config(
  { ignores: ['dist/**', 'data/**', 'node_modules/**', '.tap/**', 'coverage/**', 'test/artifacts/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    ignores: BROWSER_JS,
    languageOptions: {
      globals: {
        process: 'readonly', console: 'readonly', URL: 'readonly', setTimeout: 'readonly', clearTimeout: 'readonly',
        setImmediate: 'readonly', AbortController: 'readonly', AbortSignal: 'readonly', Buffer: 'readonly'
      }
    }
  },
  {
    files: BROWSER_JS,
    languageOptions: { globals: BROWSER_GLOBALS }
  },
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/no-explicit-any': 'off'
    }
  }
)
