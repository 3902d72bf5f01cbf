# syntax=docker/dockerfile:1

# 1. Compile TypeScript to plain JavaScript.
FROM node:20-bookworm-slim AS build
WORKDIR /app
# onnxruntime-node's install script would download CUDA files; its CPU binaries ship in the package.
ENV ONNXRUNTIME_NODE_INSTALL=skip
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm run build

# 2. Production dependencies only.
FROM node:20-bookworm-slim AS deps
WORKDIR /app
ENV ONNXRUNTIME_NODE_INSTALL=skip
COPY package.json package-lock.json ./
# onnxruntime-node ships native libraries for every OS; only Linux's are used here (-220 MB).
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force \
 && rm -rf node_modules/onnxruntime-node/bin/napi-v6/darwin node_modules/onnxruntime-node/bin/napi-v6/win32

# 3. Runtime: no compiler, no dev dependencies, not root.
#    Mount your configuration and local models read-only, e.g.
#      docker run -p 4000:4000 -e OPENAI_API_KEY \
#        -v "$PWD/providers.yaml:/app/providers.yaml:ro" -v "$PWD/models:/app/models:ro" switchyard
#    (or point SWITCHYARD_CONFIG at a mounted file). `docker kill -s HUP` reloads the config.
FROM node:20-bookworm-slim AS runtime
# MALLOC_MMAP_THRESHOLD_: glibc gives every allocation of 128 KiB or more its own mapping, returned
# to the OS when freed. By default the threshold rises after such a block is freed, and large
# answers (embeddings: ~300 KB each) then come from the heap, whose free holes are not returned:
# the gateway's RSS ratcheted up ~40 MB under embeddings load. No measurable CPU cost (large answer
# buffers are reused, src/backends/upstream/body-pool.ts); docs/performance.md has the numbers.
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=4000 \
    MALLOC_MMAP_THRESHOLD_=131072
WORKDIR /app
COPY --from=deps --chown=node:node /app/node_modules ./node_modules
COPY --from=build --chown=node:node /app/dist ./dist
COPY --chown=node:node package.json providers.yaml ./
COPY --chown=node:node scripts/switchyard.mjs ./scripts/switchyard.mjs
USER node
EXPOSE 4000
HEALTHCHECK --interval=15s --timeout=3s --start-period=10s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.PORT || 4000) + '/health').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
STOPSIGNAL SIGTERM
CMD ["node", "dist/main.js"]
