import type { FastifyBaseLogger } from 'fastify'
import type { Bindings, ChildLoggerOptions } from 'fastify/types/logger.js'

type Level = 'trace' | 'debug' | 'info' | 'warn' | 'error' | 'fatal'
type LogFn = (...args: unknown[]) => void
/** pino's loggers tell whether a level is written. */
type LevelAware = FastifyBaseLogger & { isLevelEnabled: (level: string) => boolean }

/**
 * A request's logger, made when a line is first written at an enabled level (or when something
 * asks for its level, bindings or a child of it), rather than for every request: a pino child
 * serializes and redacts its bindings when it is made, a cost every request paid even at LOG_LEVEL
 * warn, where a request that goes well writes no line at all. What it writes is exactly what the
 * child would have written, request id included.
 */
class RequestLogger {
  private made: LevelAware | undefined

  constructor (private readonly parent: LevelAware, private readonly bindings_: Bindings) {}

  private write (level: Level, args: unknown[]): void {
    if (this.made !== undefined || this.parent.isLevelEnabled(level)) (this.real()[level] as LogFn)(...args)
  }

  trace (...args: unknown[]): void { this.write('trace', args) }
  debug (...args: unknown[]): void { this.write('debug', args) }
  info (...args: unknown[]): void { this.write('info', args) }
  warn (...args: unknown[]): void { this.write('warn', args) }
  error (...args: unknown[]): void { this.write('error', args) }
  fatal (...args: unknown[]): void { this.write('fatal', args) }

  private real (): LevelAware {
    return this.made ??= this.parent.child(this.bindings_) as LevelAware
  }

  get level (): string { return this.made?.level ?? this.parent.level }
  set level (level: string) { this.real().level = level }
  isLevelEnabled (level: string): boolean { return (this.made ?? this.parent).isLevelEnabled(level) }
  child (bindings: Bindings, options?: ChildLoggerOptions): FastifyBaseLogger { return this.real().child(bindings, options) }
  bindings (): Bindings { return (this.real() as unknown as { bindings: () => Bindings }).bindings() }
  silent (): void {}
}

/**
 * Fastify's childLoggerFactory: a lazy request logger, unless the route asks for its own level or
 * serializers, or the logger cannot say which levels it writes (then the child is made at once,
 * as Fastify would).
 */
export function requestLoggerFactory (logger: FastifyBaseLogger, bindings: Bindings, options: ChildLoggerOptions): FastifyBaseLogger {
  // Fastify passes nothing but a route's level and serializers.
  if (options.level !== undefined || options.serializers !== undefined || typeof (logger as Partial<LevelAware>).isLevelEnabled !== 'function') return logger.child(bindings, options)
  return new RequestLogger(logger as LevelAware, bindings) as unknown as FastifyBaseLogger
}
