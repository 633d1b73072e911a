# For building the images with Docker (or another OCI builder) elsewhere, one target per
# binary:
#
#   docker build --target bcd -t REGISTRY/bcd:TAG .        (or bc-api, bc-reconciler)
#
# The tested images are the ones `cargo xtask image` writes to target/image/<name>.oci.tar
# without a container daemon: `cargo xtask test` reads each with skopeo, unpacks it with
# umoci and runs its binary from its own root filesystem as its user. No test builds this
# file. It mirrors those images: the release binary in /usr/local/bin as the entrypoint,
# glibc and the CA bundle (here from distroless's cc image), and the numeric non-root
# user 65532:65532, which the bcd DaemonSet and deploy/ rely on (they set runAsNonRoot
# and leave the uid to the image).

FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p bc-api-bin -p bc-reconciler -p bcd --bins

FROM gcr.io/distroless/cc-debian12:nonroot AS runtime
USER 65532:65532
ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt

FROM runtime AS bc-api
COPY --from=build /src/target/release/bc-api /usr/local/bin/bc-api
ENTRYPOINT ["/usr/local/bin/bc-api"]
CMD ["serve"]

FROM runtime AS bc-reconciler
COPY --from=build /src/target/release/bc-reconciler /usr/local/bin/bc-reconciler
ENTRYPOINT ["/usr/local/bin/bc-reconciler"]

FROM runtime AS bcd
COPY --from=build /src/target/release/bcd /usr/local/bin/bcd
ENTRYPOINT ["/usr/local/bin/bcd"]
