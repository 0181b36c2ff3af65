# syntax=docker/dockerfile:1.7
# The tool worker's base image: `taskline tool-worker`, no model, no GPU. A team's tool image builds
# FROM it, copies its built module in and sets TASKLINE_TOOL_MODULE (examples/ci-pipeline/Dockerfile).
# Build from the repository root: docker build -f deploy/docker/tool-worker.Dockerfile .
# The runtime is Debian slim with Node and npm, not distroless: tools run processes of their own
# (git, npm, a vendor's CLI), which a team's image adds with apt-get. Both bases are build arguments
# (offline builds: test/deploy/images/build.sh), pinned by tag and digest.
ARG BUILD_BASE=node:20.19-bookworm-slim@sha256:b342de02eb4a57cd6986290a69833d20818508db8078dba0197a024193410aee
ARG RUNTIME_BASE=node:20.19-bookworm-slim@sha256:b342de02eb4a57cd6986290a69833d20818508db8078dba0197a024193410aee
FROM ${BUILD_BASE} AS build
# A base that already carries this pnpm skips corepack's download.
RUN pnpm --version 2>/dev/null | grep -qx 10.34.8 || (corepack enable && corepack prepare pnpm@10.34.8 --activate)
WORKDIR /src
COPY package.json pnpm-lock.yaml pnpm-workspace.yaml tsconfig.json tsconfig.base.json ./
COPY packages ./packages
COPY services ./services
# The tool worker never loads onnxruntime; skip its native download.
ENV ONNXRUNTIME_NODE_INSTALL=skip
# Extra install flags, e.g. --offline with a mounted pnpm store.
ARG PNPM_INSTALL_FLAGS=
RUN pnpm install --frozen-lockfile ${PNPM_INSTALL_FLAGS} --filter "@taskline/cli..." \
 && pnpm exec tsc -b packages/cli \
 && pnpm --filter @taskline/cli --config.inject-workspace-packages=true deploy --prod ${PNPM_INSTALL_FLAGS} /out

FROM ${RUNTIME_BASE} AS runtime
RUN groupadd --system --gid 10001 taskline \
 && useradd --system --uid 10001 --gid taskline --no-create-home --shell /usr/sbin/nologin taskline
# HOME in /tmp: the chart mounts the root filesystem read-only and /tmp writable, and tools' npm,
# git and the like keep their caches and config under HOME.
ENV NODE_ENV=production \
    HOME=/tmp
WORKDIR /app
COPY --from=build --chown=10001:10001 /out ./
USER 10001:10001
EXPOSE 9464
# The shell only expands the module's path, then `exec` hands its pid to node, so SIGTERM (the
# drain) reaches the worker itself. Arguments given to the container are appended.
ENTRYPOINT ["/bin/sh", "-c", "exec node /app/bin/taskline.js tool-worker --module \"$TASKLINE_TOOL_MODULE\" \"$@\"", "tool-worker"]
