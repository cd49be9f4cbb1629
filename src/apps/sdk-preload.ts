/**
 * Preloaded (`node --import`) by `reaktor test` into an app's test run: an app folder has its own
 * package.json, so without the service's resolve hook its tests could not import
 * `reaktor-service/sdk` or `reaktor-service/testing`.
 */
import { ensureSdkResolution } from './sdk-resolution.js'

ensureSdkResolution()
