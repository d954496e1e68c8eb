# The single teapot-lb image: every component is `teapot-lb <component>`.
#
#   docker build -t ghcr.io/teapot/teapot-lb:0.1.0 .
#
# Without Docker or a registry, scripts/build-image.sh builds the equivalent image from
# Debian packages (mmdebstrap + umoci; docs/install.md), and tests/image runs it.
#
# keepalived is included for the VIP mode of the speaker; the BGP and L2 modes are
# pure Python. The default user is unprivileged (65532; the controller runs as it); the
# speaker's DaemonSet runs it as uid 0 with only NET_RAW, NET_ADMIN and NET_BIND_SERVICE
# (BGP's port 179).

FROM python:3.11-slim-bookworm AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY src ./src
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.11-slim-bookworm
RUN apt-get update \
    && apt-get install -y --no-install-recommends keepalived \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir --no-index --find-links=/wheels teapot-lb \
    && rm -rf /wheels
USER 65532:65532
ENV PYTHONUNBUFFERED=1
ENTRYPOINT ["teapot-lb"]
CMD ["--help"]
