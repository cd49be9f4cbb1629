# syntax=docker/dockerfile:1
# Multi-stage build of reaktor-service. Cannot be built on the development machines of this
# project (no Docker engine there); kept correct by review.

FROM node:24-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm run build && npm prune --omit=dev

FROM node:24-bookworm-slim
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=3000 \
    DATA_DIR=/data \
    REAKTOR_APPS_DIR=/app/apps
WORKDIR /app
# The embedded PostgreSQL (used when DATABASE_URL is unset) runs as this same non-root user.
# /app/.config is where `reaktor login` keeps its token (the user's home is /app, owned by root).
RUN groupadd --system reaktor && useradd --system --gid reaktor --home /app reaktor \
    && mkdir -p /data /app/.config && chown reaktor:reaktor /data /app/.config \
    && ln -s /app/bin/reaktor.js /usr/local/bin/reaktor
COPY --from=build --chown=reaktor:reaktor /app/node_modules ./node_modules
COPY --from=build --chown=reaktor:reaktor /app/dist ./dist
COPY --chown=reaktor:reaktor package.json ./
# The `reaktor` command (on PATH through the link above): without src/ it runs dist/cli.
COPY --chown=reaktor:reaktor --chmod=755 bin ./bin
# The apps shipped with the service: the console (always served) and the examples (loaded only with
# EXAMPLE_APPS=true). Your own apps: publish them (POST /api/v1/apps, `reaktor apps publish`), or
# mount a folder of them at /app/apps (REAKTOR_APPS_DIR), which hides none of these.
COPY --chown=reaktor:reaktor reaktor-apps ./reaktor-apps
USER reaktor
VOLUME ["/data"]
EXPOSE 3000
HEALTHCHECK --interval=15s --timeout=3s --start-period=30s --retries=3 \
  CMD node -e "fetch('http://127.0.0.1:'+(process.env.PORT||3000)+'/readyz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"
CMD ["node", "dist/server.js"]
