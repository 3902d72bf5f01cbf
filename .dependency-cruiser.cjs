/**
 * Layering rules, checked in `npm test` (scripts/test.mjs runs `depcruise` before the tests).
 * Layers, top to bottom — a module may import its own layer and the layers below it, never above:
 *
 *   main.ts, cli.ts → server/ → http/ → gateway/ → router/ → backends/
 *     → cache/ limits/ state/ db/ telemetry/ config/ → protocol/ → errors/ → lib/
 */
const layer = (name, above, allowed) => ({
  name: `${name}-not-up`,
  comment: `src/${name}/ must not import ${above.join(', ')} (a layer above it)`,
  severity: 'error',
  from: { path: `^src/${name}/` },
  to: { path: `^src/(${above.join('|')})/`, ...(allowed ? { pathNot: allowed } : {}) },
});

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      comment: 'import cycles hide the layering; shared types go into their folder\'s types.ts',
      severity: 'error',
      from: { path: '^src/' },
      to: { circular: true },
    },
    {
      name: 'no-entry-imports',
      comment: 'nothing imports the entry points',
      severity: 'error',
      from: { path: '^src/' },
      to: { path: '^src/(main|cli)\\.ts$' },
    },
    layer('http', ['server']),
    layer('gateway', ['server', 'http']),
    layer('router', ['server', 'http', 'gateway']),
    layer('backends', ['server', 'http', 'gateway', 'router']),
    layer('cache', ['server', 'http', 'gateway', 'router', 'backends']),
    layer('limits', ['server', 'http', 'gateway', 'router', 'backends']),
    // The memory store runs the rate limit's algorithm inside its own atomic step (the Redis store
    // runs it in Lua); gcra.ts is pure and imports nothing, so this adds no path up the layers.
    layer('state', ['server', 'http', 'gateway', 'router', 'backends', 'cache', 'limits'], '^src/limits/gcra\\.ts$'),
    layer('db', ['server', 'http', 'gateway', 'router', 'backends', 'cache', 'limits', 'state']),
    layer('telemetry', ['server', 'http', 'gateway', 'router', 'backends', 'cache', 'limits', 'state', 'db']),
    layer('config', ['server', 'http', 'gateway', 'router', 'backends', 'cache', 'limits', 'state', 'db', 'telemetry']),
    layer('protocol', ['server', 'http', 'gateway', 'router', 'backends', 'cache', 'limits', 'state', 'db', 'telemetry', 'config']),
    layer('errors', ['server', 'http', 'gateway', 'router', 'backends', 'cache', 'limits', 'state', 'db', 'telemetry', 'config', 'protocol']),
    layer('lib', ['server', 'http', 'gateway', 'router', 'backends', 'cache', 'limits', 'state', 'db', 'telemetry', 'config', 'protocol', 'errors']),
    {
      name: 'backends-apart',
      comment: 'a backend folder imports only itself, the shared upstream folder (client, OpenAI-compatible backend) and the files at backends/ root',
      severity: 'error',
      from: { path: '^src/backends/([^/]+)/' },
      to: { path: '^src/backends/[^/]+/', pathNot: '^src/backends/($1|upstream)/' },
    },
    {
      name: 'tracing-from-the-top',
      comment:
        'only main.ts, server/ and http/ use the tracer; below them a request\'s trace comes with the request (RouteRequest, CallContext), so they import its facts and interfaces as types only',
      severity: 'error',
      from: { path: '^src/', pathNot: '^src/(main\\.ts$|server/|http/|telemetry/tracing)' },
      to: { path: '^src/telemetry/tracing[^/]*\\.ts$', dependencyTypesNot: ['type-only'] },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '\\.test\\.ts$' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { extensions: ['.ts', '.js'] },
  },
};
