import { Argument, InvalidArgumentError, type Command } from 'commander'
import { isPackageName, isPackageVersion, PACKAGE_NAME_MAX, PACKAGE_VERSION_MAX } from '../../apps/loader.js'
import { readPackageSource } from '../app-pack.js'
import type { ApiClient } from '../client.js'
import { CliError, EXIT, type CliContext, type CommandModule } from '../context.js'
import { formatFields, formatTable, printable, printJson, shellWord } from '../output.js'
import { confirm } from '../prompt.js'

/** The answers of `/api/v1/apps` (src/schemas/apps.ts), the fields the CLI shows. */
interface AppSummary { name: string, activeVersion: string | null, changedAt: string | null, changedBy: string | null, versions: number, latestPublishedAt: string | null }
interface AppVersion { version: string, sha256: string, size: number, publishedAt: string, publishedBy: string | null }
interface NodeState { nodeId: string, version: string | null, since: string | null, error: string | null }
interface AppDetails { name: string, activeVersion: string | null, changedAt: string | null, changedBy: string | null, versions: AppVersion[], nodes: NodeState[] }
/** What the node that answered runs of the app once it switched. */
interface ThisNode { nodeId: string, version: string | null, error: string | null }
interface Published { name: string, version: string, sha256: string, size: number, stored: boolean, activated: boolean, previous: string | null, thisNode?: ThisNode }
interface Activated { name: string, version: string, previous: string | null, changed: boolean, thisNode?: ThisNode }

/** As many hex digits of a sha256 as the service's own messages show. */
const SHORT_SHA = 12

/** Where one app's routes are: a scoped name (@acme/widgets) is one path segment, its / encoded. */
const appPath = (name: string): string => `/apps/${encodeURIComponent(name)}`

// The rules a package is published under: a name or version outside them names no published app,
// so it is a usage error, as a bad option is, with no request sent.
function appName (value: string): string {
  if (value.length > PACKAGE_NAME_MAX || !isPackageName(value)) {
    throw new InvalidArgumentError(`${JSON.stringify(value)} is not an app name: a package name of at most ${PACKAGE_NAME_MAX} characters, lower case letters, digits, - . _ ~, optionally @scope/ (e.g. my-app, @acme/widgets)`)
  }
  return value
}

function appVersion (value: string): string {
  if (value.length > PACKAGE_VERSION_MAX || !isPackageVersion(value)) {
    throw new InvalidArgumentError(`${JSON.stringify(value)} is not an app version: letters, digits, . + _ - (e.g. 1.2.0), at most ${PACKAGE_VERSION_MAX} characters`)
  }
  return value
}

/**
 * `name` or `name@version`. The version follows the last @ that does not start the name: a scoped
 * name begins with one (`@acme/widgets@1.2.0` is @acme/widgets, version 1.2.0).
 */
export function splitAppSpec (spec: string): { name: string, version?: string } {
  const at = spec.lastIndexOf('@')
  if (at <= 0) return { name: appName(spec) }
  return { name: appName(spec.slice(0, at)), version: appVersion(spec.slice(at + 1)) }
}

/** 2048 as "2.0 KiB": a package's size at a glance (--json has the bytes). */
export function formatBytes (bytes: number): string {
  const units = ['KiB', 'MiB', 'GiB']
  if (bytes < 1024) return `${bytes} B`
  let value = bytes / 1024
  let unit = 0
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024
    unit++
  }
  return `${value.toFixed(1)} ${units[unit]}`
}

function example (command: Command, ...lines: string[]): Command {
  return command.addHelpText('after', `\nExample${lines.length > 1 ? 's' : ''}:\n${lines.map((l) => `  $ ${l}`).join('\n')}`)
}

async function showApp (api: ApiClient, name: string): Promise<AppDetails> {
  return await api.request<AppDetails>('GET', appPath(name))
}

/** What a publish did, in one sentence (and the command that activates a version stored without it). */
function publishedMessage (p: Published): string {
  const id = `${p.name}@${p.version}`
  const what = `(${formatBytes(p.size)}, sha256 ${p.sha256.slice(0, SHORT_SHA)})`
  const replaced = p.previous === null ? 'the app\'s first active version' : `it replaces ${p.previous}`
  if (p.activated) {
    return (p.stored
      ? `Published ${id} ${what} and activated it (${replaced}): every node switches to it.\n`
      : `${id} was already published with these bytes ${what}; it is activated now (${replaced}): every node switches to it.\n`) + notSwitched(p.thisNode)
  }
  const active = p.previous === p.version ? 'it is the active version' : `the active version is ${p.previous ?? 'none'}`
  if (!p.stored) return `${id} is already published with these bytes ${what}; nothing changed (${active}).\n`
  return `Stored ${id} ${what} without activating it (${active}). To activate it: reaktor apps activate ${shellWord(p.name)} ${shellWord(p.version)}\n`
}

function activatedMessage (a: Activated): string {
  if (!a.changed) return `${a.name}@${a.version} is already the active version: nothing changed.\n`
  return `Activated ${a.name}@${a.version}${a.previous === null ? '' : ` (it replaces ${a.previous})`}: every node switches to it.\n${notSwitched(a.thisNode)}`
}

/** A line when the node that answered could not load the version (the others may have). */
function notSwitched (node: ThisNode | undefined): string {
  if (node?.error === undefined || node.error === null) return ''
  return `Warning: node ${node.nodeId} could not load it and runs ${node.version ?? 'no version of it'}: ${node.error}\n`
}

/**
 * The version a rollback activates: the one published just before the active one (the next in
 * the service's newest-first list). None is an error that says what can be done instead.
 */
export function rollbackTarget (app: AppDetails): string {
  const { name, activeVersion, versions } = app
  const activate = `reaktor apps activate ${shellWord(name)} <version>`
  if (activeVersion === null) throw new CliError(EXIT.error, `app ${name} has no active version, so there is nothing to roll back from: activate one with ${activate}`)
  const index = versions.findIndex((v) => v.version === activeVersion)
  if (index === -1) throw new CliError(EXIT.error, `the active version of app ${name}, ${activeVersion}, is not among its published versions: activate one with ${activate}`)
  const earlier = versions[index + 1]
  if (earlier === undefined) {
    throw new CliError(EXIT.error, `${name}@${activeVersion} is the oldest published version of the app: there is no earlier version to roll back to (to activate a newer one: ${activate})`)
  }
  return earlier.version
}

function printDetails (context: CliContext, app: AppDetails): void {
  const { io } = context
  io.stdout.write(formatFields([
    ['name', app.name],
    ['active', app.activeVersion ?? 'none'],
    ['changed', app.changedAt],
    ['changed by', app.changedBy]
  ]))
  io.stdout.write('\nVersions, newest first:\n')
  io.stdout.write(formatTable(app.versions, [
    { header: 'VERSION', value: (v) => v.version },
    { header: 'ACTIVE', value: (v) => v.version === app.activeVersion ? 'active' : null },
    { header: 'SIZE', value: (v) => formatBytes(v.size) },
    { header: 'SHA256', value: (v) => v.sha256.slice(0, SHORT_SHA) },
    { header: 'PUBLISHED', value: (v) => v.publishedAt },
    { header: 'BY', value: (v) => v.publishedBy }
  ]))
  io.stdout.write('\nNodes:\n')
  io.stdout.write(formatTable(app.nodes, [
    { header: 'NODE', value: (n) => n.nodeId },
    { header: 'VERSION', value: (n) => n.version ?? 'none' },
    { header: 'SINCE', value: (n) => n.since },
    { header: 'ERROR', value: (n) => n.error }
  ]))
}

/** `reaktor apps …` over `/api/v1/apps`: apps published to the service as npm packages. */
export const publishedAppCommands: CommandModule = (program, context) => {
  const { io } = context
  /** Activate and rollback: one request, one answer. */
  const activate = async (api: ApiClient, name: string, version: string): Promise<void> => {
    const answer = await api.request<Activated>('POST', `${appPath(name)}/activate`, { body: { version } })
    if (context.json()) return printJson(io, answer)
    io.stdout.write(printable(activatedMessage(answer)))
  }
  const apps = example(program.command('apps')
    .description('apps published to the service (npm packages stored in its database): list, show, publish, activate, rollback, delete'),
  'reaktor apps publish ./my-app', 'reaktor apps show my-app')
    .addHelpText('after', '\nPublishing, activating and deleting are for admins.')

  example(apps.command('list').description('every published app, by name: its active version, how many versions are stored, and the last change of the active version'),
    'reaktor apps list', 'reaktor --json apps list')
    .action(async () => {
      const answer = await (await context.api()).request<{ apps: AppSummary[] }>('GET', '/apps')
      if (context.json()) return printJson(io, answer)
      io.stdout.write(formatTable(answer.apps, [
        { header: 'NAME', value: (a) => a.name },
        { header: 'ACTIVE', value: (a) => a.activeVersion ?? 'none' },
        { header: 'VERSIONS', value: (a) => a.versions },
        { header: 'CHANGED', value: (a) => a.changedAt },
        { header: 'CHANGED BY', value: (a) => a.changedBy }
      ]))
    })

  example(apps.command('show')
    .description('one published app: its versions, newest first, the active one marked; then what each node runs of it')
    .addArgument(new Argument('<name>', 'the app (package) name, e.g. my-app or @acme/widgets').argParser(appName)),
  'reaktor apps show @acme/widgets', 'reaktor --json apps show my-app')
    .action(async (name: string) => {
      const app = await showApp(await context.api(), name)
      if (context.json()) return printJson(io, app)
      printDetails(context, app)
    })

  example(apps.command('publish')
    .description('publish a version of an app: a folder (packed with npm pack) or a .tgz that npm pack wrote; activated on every node unless --no-activate')
    .addArgument(new Argument('[source]', 'the app folder, or its .tgz (default: the current folder)'))
    .option('--no-activate', 'store the version without switching to it (activate it later with "reaktor apps activate")')
    .addHelpText('after', '\nThe service loads the package as a start would before it stores anything: a package that would\n' +
      'not load is refused (exit 1) with the error a start would give. A version is immutable: the\n' +
      'same bytes again change nothing; other bytes under a published version are refused (exit 1).'),
  'reaktor apps publish', 'reaktor apps publish ./reaktor-apps/my-app --no-activate', 'reaktor apps publish my-app-1.2.0.tgz')
    .action(async (source: string | undefined, opts: { activate: boolean }) => {
      const api = await context.api()
      const { bytes } = await readPackageSource(io, source ?? '.')
      const answer = await api.request<Published>('POST', '/apps', {
        raw: { bytes, contentType: 'application/gzip' },
        query: { activate: opts.activate ? undefined : 'false' }
      })
      if (context.json()) return printJson(io, answer)
      io.stdout.write(printable(publishedMessage(answer)))
    })

  example(apps.command('activate')
    .description('switch every node to a published version of an app (an earlier one: a rollback)')
    .addArgument(new Argument('<name>', 'the app (package) name').argParser(appName))
    .addArgument(new Argument('<version>', 'a published version of it, as "reaktor apps show" lists them').argParser(appVersion)),
  'reaktor apps activate my-app 1.2.0')
    .action(async (name: string, version: string) => { await activate(await context.api(), name, version) })

  example(apps.command('rollback')
    .description('activate the version published just before the active one (the next older one "reaktor apps show" lists)')
    .addArgument(new Argument('<name>', 'the app (package) name').argParser(appName)),
  'reaktor apps rollback my-app')
    .action(async (name: string) => {
      const api = await context.api()
      await activate(api, name, rollbackTarget(await showApp(api, name)))
    })

  example(apps.command('delete')
    .description('delete one version of an app (<name>@<version>; not the active one), or the whole app (<name>): every node stops and unlists its reaktors, and every version is deleted; the whole app asks first unless --yes (without a terminal, --yes is needed)')
    .addArgument(new Argument('<name[@version]>', 'the app, or one version of it: my-app@1.2.0, @acme/widgets@1.2.0').argParser(splitAppSpec))
    .option('-y, --yes', 'do not ask'),
  'reaktor apps delete my-app@1.1.0', 'reaktor apps delete @acme/widgets --yes')
    .action(async (spec: { name: string, version?: string }, opts: { yes?: boolean }) => {
      const { name, version } = spec
      const path = version === undefined ? appPath(name) : `${appPath(name)}/versions/${encodeURIComponent(version)}`
      if (version === undefined && opts.yes !== true && !await confirm(io, `Delete app "${name}" and every version of it (every node stops and unlists its reaktors)?`, '--yes')) {
        throw new CliError(EXIT.error, `app "${name}" not deleted`)
      }
      const answer = await (await context.api()).request<{ message: string }>('DELETE', path)
      if (context.json()) return printJson(io, answer)
      io.stdout.write(`${printable(answer.message)}\n`)
    })
}
