/**
 * pino-pretty's options, for a person reading the log: at a terminal (src/server.ts) and under
 * `npm run dev` (src/dev.ts). A module of its own so that the dev supervisor, which formats the
 * service's lines, need not import the whole service to read them.
 */
export const PRETTY_LOG_OPTIONS = { translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname' }
