# Images of the controller and the node agent, one binary each:
#
#   docker build --build-arg BIN=nettune-controller -t REGISTRY/nettune-controller:0.1.0 .
#   docker build --build-arg BIN=nettune-agent      -t REGISTRY/nettune-agent:0.1.0 .
#
# For Jetson (Xavier/Orin, arm64) vehicles add --platform linux/arm64 (or
# build both with docker buildx --platform linux/amd64,linux/arm64).
# Without Docker, `make images` builds the same two images as multi-arch
# OCI archives (bin/images/*.oci.tar, hack/images): the same build flags,
# one layer with the binary at /usr/local/bin/app and distroless/static's
# users, but none of its CA certificates or tzdata: a Loki or Prometheus
# URL over https with a certificate from a public CA needs this image.
# The binaries are static (pure Go, no cgo); the agent talks netlink itself
# and needs no tools in the image.
FROM golang:1.26 AS build
ARG BIN
ARG TARGETOS=linux
ARG TARGETARCH=amd64
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY api/ api/
# The controller embeds the chart it installs as an OCM add-on (charts/charts.go).
COPY charts/ charts/
COPY cmd/ cmd/
COPY controllers/ controllers/
COPY internal/ internal/
COPY node-agent/ node-agent/
RUN test -n "$BIN" && CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath -ldflags "-s -w" -o /out/app ./cmd/$BIN

# distroless/static: no shell, no package manager. The controller runs as
# 65532 (the chart's runAsUser); the agent runs as uid 0 with CAP_NET_ADMIN
# only (the chart drops every other capability).
FROM gcr.io/distroless/static-debian12
COPY --from=build /out/app /usr/local/bin/app
ENTRYPOINT ["/usr/local/bin/app"]
