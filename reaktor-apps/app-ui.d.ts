// What the service gives every page of an app UI, beyond the browser's own globals: the token
// helper it injects into each HTML page it serves (docs/app-ui.md, "The token helper"). Optional,
// because a page opened any other way (a file, another server) has none.
interface Window {
  /** The session token of the signed-in user, or null when there is no session (any more). */
  getServiceAuthToken?: () => string | null
}
