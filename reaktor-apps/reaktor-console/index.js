// @ts-check
/*
 * The operator console: a UI-only app. Everything it shows and does goes through the public REST
 * API with the signed-in user's session token (window.getServiceAuthToken()), like any app's UI.
 */
import { defineApp } from 'reaktor-service/sdk'

export default defineApp({ pollingReaktors: [], reaktors: [] })
