# syntax=docker/dockerfile:1.7
# Build from the repository root: docker build -f deploy/docker/gpu-worker.Dockerfile .
# Stage 1 compiles the workspace and installs onnxruntime-node with its CUDA 12 execution
# provider; stage 2 is NVIDIA's CUDA runtime with cuDNN (which that provider links against).
FROM node:20.19-bookworm-slim AS build
RUN corepack enable && corepack prepare pnpm@10.34.8 --activate
WORKDIR /src
COPY package.json pnpm-lock.yaml pnpm-workspace.yaml tsconfig.json tsconfig.base.json ./
COPY packages ./packages
COPY services ./services
# onnxruntime-node's install script fetches the CUDA 12 provider binaries when asked to.
ENV ONNXRUNTIME_NODE_INSTALL=cuda12
RUN pnpm install --frozen-lockfile \
 && pnpm exec tsc -b services/gpu-worker \
 && pnpm --filter @taskline/gpu-worker deploy --prod --legacy /out

FROM nvidia/cuda:12.8.1-cudnn-runtime-ubuntu24.04 AS runtime
# Node's binary only: the CUDA image already has the C++ runtime it needs.
COPY --from=build /usr/local/bin/node /usr/local/bin/node
RUN groupadd --system --gid 10001 taskline \
 && useradd --system --uid 10001 --gid taskline --no-create-home --shell /usr/sbin/nologin taskline
ENV NODE_ENV=production \
    NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility
WORKDIR /app
COPY --from=build --chown=10001:10001 /out ./
# Models are mounted (or baked by a derived image) at /models; see values.yaml gpuWorker.models.
USER 10001:10001
EXPOSE 9464 50051
ENTRYPOINT ["node", "dist/main.js"]
