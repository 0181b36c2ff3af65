# syntax=docker/dockerfile:1.7
# Build from the repository root: docker build -f deploy/docker/api.Dockerfile .
# Stage 1 compiles the workspace; stage 2 carries only the service's production dependencies.
FROM node:20.19-bookworm-slim AS build
RUN corepack enable && corepack prepare pnpm@10.34.8 --activate
WORKDIR /src
COPY package.json pnpm-lock.yaml pnpm-workspace.yaml tsconfig.json tsconfig.base.json ./
COPY packages ./packages
COPY services ./services
# The api never loads onnxruntime; skip its native download.
ENV ONNXRUNTIME_NODE_INSTALL=skip
RUN pnpm install --frozen-lockfile \
 && pnpm exec tsc -b services/api \
 && pnpm --filter @taskline/api deploy --prod --legacy /out

# Distroless: no shell or package manager in production, and it runs as uid 65532.
FROM gcr.io/distroless/nodejs20-debian12:nonroot AS runtime
ENV NODE_ENV=production
WORKDIR /app
COPY --from=build --chown=65532:65532 /out ./
USER 65532:65532
EXPOSE 8080 9464
CMD ["dist/main.js"]
