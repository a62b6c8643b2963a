import { defineConfig } from 'vitest/config';

// The viewer is served by `tensortrace serve` from web/dist; during development `npm run dev` proxies the API to a
// running server (TT_API, default http://127.0.0.1:8080).
export default defineConfig({
  base: './',
  build: { outDir: 'dist', emptyOutDir: true, sourcemap: false, chunkSizeWarningLimit: 1000 },
  server: { proxy: { '/api': process.env.TT_API ?? 'http://127.0.0.1:8080' } },
  // The timeout only catches a hang (speed is not a unit test's business): vitest's 5 s default failed the ~500-node
  // layout test on a loaded 2-core machine.
  test: { include: ['tests/**/*.test.ts'], testTimeout: 60_000 },
});
