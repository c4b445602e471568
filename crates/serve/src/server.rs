//! The server: binds before anything else starts (so a taken port is one
//! sentence at start-up), then runs its own small tokio runtime on threads
//! of its own, apart from capture. Connections are served by hyper (HTTP/1.1,
//! through rustls when TLS is on) with a header timeout, so a slow client
//! holds nothing but its own connection; at most [`MAX_CONNECTIONS`] are
//! open at once, at most [`MAX_PER_ADDRESS`] of them from one client address.

use crate::auth::{Peer, Tokens};
use crate::metrics::ApiMetrics;
use crate::store_view::StoreView;
use crate::{Config, LiveCounters, LogLevel};
use axum::extract::{Request, State as Ax};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use hyper_util::rt::TokioIo;
use std::net::SocketAddr;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;

/// Connections served at once; more wait in the kernel's backlog.
pub const MAX_CONNECTIONS: usize = 512;

/// Connections one client address (an IPv6 /64) may hold at once, so that
/// one client, idle or slow, cannot take every slot: a connection past it
/// is answered 503 with `Retry-After` (plain HTTP) or closed (TLS, before
/// any handshake) at once.
pub const MAX_PER_ADDRESS: usize = 64;

/// Open connections per client address.
#[derive(Default)]
struct PerAddress(std::sync::Mutex<std::collections::HashMap<std::net::IpAddr, usize>>);

/// One connection's place in [`PerAddress`], given back when dropped.
struct AddressSlot(Arc<PerAddress>, std::net::IpAddr);

impl PerAddress {
    /// The address a client is counted under: IPv4 (also mapped into
    /// IPv6) as it is, IPv6 by its /64 (one host holds a whole one).
    fn key(addr: std::net::IpAddr) -> std::net::IpAddr {
        match addr {
            std::net::IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => v4.into(),
                None => std::net::Ipv6Addr::from(u128::from(v6) & !((1u128 << 64) - 1)).into(),
            },
            v4 => v4,
        }
    }

    /// A slot for a new connection from `addr`; `None` when it holds
    /// [`MAX_PER_ADDRESS`] already.
    fn take(self: &Arc<Self>, addr: std::net::IpAddr) -> Option<AddressSlot> {
        let key = Self::key(addr);
        let mut m = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let n = m.entry(key).or_insert(0);
        if *n >= MAX_PER_ADDRESS {
            return None;
        }
        *n += 1;
        Some(AddressSlot(self.clone(), key))
    }
}

impl Drop for AddressSlot {
    fn drop(&mut self) {
        let mut m = self.0 .0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = m.get_mut(&self.1) {
            *n -= 1;
            if *n == 0 {
                m.remove(&self.1);
            }
        }
    }
}

/// Answers a plain-HTTP connection past [`MAX_PER_ADDRESS`] with a 503
/// before closing it (a client sees why, and when to retry).
async fn refuse_busy(mut tcp: tokio::net::TcpStream) {
    use tokio::io::AsyncWriteExt;
    let body = format!("{{\"error\":\"this client address has {MAX_PER_ADDRESS} connections open already; close one or retry later\"}}\n");
    let head = format!(
        "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = tokio::time::timeout(Duration::from_secs(2), async {
        let _ = tcp.write_all(head.as_bytes()).await;
        let _ = tcp.write_all(body.as_bytes()).await;
        let _ = tcp.shutdown().await;
    })
    .await;
}

/// Why the server could not start or reload, as one sentence.
#[derive(thiserror::Error, Debug)]
pub enum ServeError {
    #[error(transparent)]
    Config(#[from] crate::ConfigError),
    #[error(transparent)]
    Tokens(#[from] crate::auth::TokenError),
    #[error(transparent)]
    Tls(#[from] crate::tls::TlsError),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot start the HTTP server: {0}")]
    Runtime(#[source] std::io::Error),
}

/// What every request handler sees.
pub(crate) struct State {
    pub cfg: Config,
    pub view: StoreView,
    pub live: Option<Arc<LiveCounters>>,
    pub tokens: RwLock<Option<Tokens>>,
    pub queries: Arc<Semaphore>,
    pub metrics: ApiMetrics,
    /// Stored files an export found damaged (see `export::Damaged`).
    pub damaged: crate::export::Damaged,
    /// Bumped by a reload that changed the client CA or CRL: every open TLS
    /// connection then closes after its current request, so a certificate
    /// revoked (or a CA dropped) is not served on a kept-alive connection.
    retire_tls: tokio::sync::watch::Sender<u64>,
    /// The client CA and CRL files' bytes as last loaded.
    client_files: std::sync::Mutex<Option<Vec<u8>>>,
    started: Instant,
    started_unix: f64,
}

/// A running server.
pub struct Server {
    addr: SocketAddr,
    state: Arc<State>,
    tls: Arc<RwLock<Option<tokio_rustls::TlsAcceptor>>>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    /// Checks the configuration, reads the tokens and TLS files, binds, and
    /// starts serving. `live` carries the live counters of a recording in
    /// this process (`None`: a store at rest).
    pub fn start(mut cfg: Config, live: Option<Arc<LiveCounters>>) -> Result<Server, ServeError> {
        cfg.check()?;
        let tokens = cfg.token_file.as_deref().map(Tokens::load).transpose()?;
        let tls = cfg.tls.as_ref().map(crate::tls::server_config).transpose()?;
        let listener =
            std::net::TcpListener::bind(cfg.listen).map_err(|source| ServeError::Bind { addr: cfg.listen, source })?;
        listener.set_nonblocking(true).map_err(ServeError::Runtime)?;
        let addr = listener.local_addr().map_err(ServeError::Runtime)?;
        // The port chosen when 0 was asked: the one requests name.
        cfg.listen = addr;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("wv-http")
            .enable_all()
            .build()
            .map_err(ServeError::Runtime)?;
        let state = Arc::new(State {
            damaged: Default::default(),
            retire_tls: tokio::sync::watch::Sender::new(0),
            client_files: std::sync::Mutex::new(cfg.tls.as_ref().and_then(client_files)),
            view: StoreView::new(&cfg.store),
            queries: Arc::new(Semaphore::new(cfg.max_queries)),
            cfg,
            live,
            tokens: RwLock::new(tokens),
            metrics: ApiMetrics::new(),
            started: Instant::now(),
            started_unix: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64()),
        });
        let tls = Arc::new(RwLock::new(tls.map(tokio_rustls::TlsAcceptor::from)));
        let (tx, rx) = tokio::sync::oneshot::channel();
        let (st, acceptor) = (state.clone(), tls.clone());
        let thread = std::thread::Builder::new()
            .name("wv-http-accept".into())
            .spawn(move || {
                runtime.block_on(async move {
                    match tokio::net::TcpListener::from_std(listener) {
                        Ok(l) => accept_loop(l, st, acceptor, rx).await,
                        Err(e) => (st.cfg.log)(LogLevel::Error, &format!("api: cannot listen: {e}")),
                    }
                });
                runtime.shutdown_timeout(Duration::from_secs(1));
            })
            .map_err(ServeError::Runtime)?;
        let s = Server { addr, state, tls, shutdown: Some(tx), thread: Some(thread) };
        let what = match &s.state.cfg.fleet {
            Some(f) => format!("a fleet of {} nodes", f.nodes().len()),
            None => s.state.cfg.store.display().to_string(),
        };
        (s.state.cfg.log)(
            LogLevel::Info,
            &format!("api: serving {what} on {}://{}/ ({})", s.state.cfg.scheme(), addr, s.auth_summary()),
        );
        Ok(s)
    }

    fn auth_summary(&self) -> String {
        let mut v = Vec::new();
        if let Some(t) = self.state.tokens.read().unwrap_or_else(|e| e.into_inner()).as_ref() {
            v.push(format!("{} bearer token(s)", t.len()));
        }
        if self.state.cfg.tls.as_ref().is_some_and(|t| t.client_ca.is_some()) {
            v.push("client certificates".to_string());
        }
        if v.is_empty() {
            "no authentication: loopback only".into()
        } else {
            v.join(" and ")
        }
    }

    /// The address it listens on (the port chosen when 0 was asked).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Reads the token file and TLS files again (SIGHUP). What fails to
    /// load leaves the previous setting in force; the sentence says what.
    pub fn reload(&self) -> Result<String, ServeError> {
        self.reloader().reload()
    }

    /// A handle that reloads this server from another thread (a recorder's reload hook).
    pub fn reloader(&self) -> Reloader {
        Reloader { state: self.state.clone(), tls: self.tls.clone() }
    }

    /// Stops listening; answers still streaming are cut after a second.
    pub fn stop(mut self) {
        self.shutdown_now();
    }

    fn shutdown_now(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Reloads a server's tokens and TLS files; see [`Server::reload`].
#[derive(Clone)]
pub struct Reloader {
    state: Arc<State>,
    tls: Arc<RwLock<Option<tokio_rustls::TlsAcceptor>>>,
}

impl Reloader {
    pub fn reload(&self) -> Result<String, ServeError> {
        let done = self.reload_changes()?;
        Ok(if done.is_empty() { "nothing to reload".into() } else { format!("reloaded {}", done.join(", ")) })
    }

    /// What [`Reloader::reload`] read again (empty: the server has no
    /// token or TLS file). Every file is read first and the settings are
    /// swapped only when all of them loaded: a reload that fails changes
    /// nothing.
    pub fn reload_changes(&self) -> Result<Vec<String>, ServeError> {
        let tokens = self.state.cfg.token_file.as_deref().map(Tokens::load).transpose()?;
        let clients = self.state.cfg.tls.as_ref().and_then(client_files);
        let tls = self.state.cfg.tls.as_ref().map(crate::tls::server_config).transpose()?;
        let mut done = Vec::new();
        if let Some(t) = tokens {
            done.push(format!("{} token(s)", t.len()));
            *self.state.tokens.write().unwrap_or_else(|e| e.into_inner()) = Some(t);
        }
        if let Some(c) = tls {
            *self.tls.write().unwrap_or_else(|e| e.into_inner()) = Some(tokio_rustls::TlsAcceptor::from(c));
            done.push("TLS certificate, key, client CA and CRL".into());
            let mut last = self.state.client_files.lock().unwrap_or_else(|e| e.into_inner());
            if clients.is_some() && *last != clients {
                *last = clients;
                self.state.retire_tls.send_modify(|g| *g += 1);
                done.push(
                    "the client CA or CRL changed: open TLS connections close after their current request".into(),
                );
            }
        }
        Ok(done)
    }
}

/// The bytes of the client CA and CRL files (`None` without a client CA,
/// or when one cannot be read: the TLS configuration then fails to load).
fn client_files(files: &crate::TlsFiles) -> Option<Vec<u8>> {
    let mut v = std::fs::read(files.client_ca.as_ref()?).ok()?;
    if let Some(crl) = &files.client_crl {
        v.extend(std::fs::read(crl).ok()?);
    }
    Some(v)
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shutdown_now();
    }
}

fn router(state: Arc<State>) -> Router {
    if state.cfg.fleet.is_some() {
        return fleet_router(state);
    }
    Router::new()
        .route("/api/v1/status", get(crate::api::status))
        .route("/api/v1/files", get(crate::api::files))
        .route("/api/v1/query", get(crate::api::query))
        .route("/api/v1/count", get(crate::api::count))
        .route("/api/v1/histogram", get(crate::api::histogram))
        .route("/api/v1/packets", get(crate::packets::packets))
        .route("/api/v1/flows", get(crate::api::flows))
        .route("/api/{*rest}", get(crate::api::unknown_api))
        .route("/metrics", get(metrics))
        .fallback(get(console))
        .layer(axum::middleware::from_fn_with_state(state.clone(), guard))
        .with_state(state)
}

/// `serve --fleet`: the query endpoints over every node, the fleet's status, metrics, console.
fn fleet_router(state: Arc<State>) -> Router {
    Router::new()
        .route("/api/v1/fleet", get(crate::fleet::fleet))
        // The console asks for the status first: a fleet's is its nodes'.
        .route("/api/v1/status", get(crate::fleet::fleet))
        .route("/api/v1/query", get(crate::fleet::query))
        .route("/api/v1/count", get(crate::fleet::count))
        .route("/api/{*rest}", get(crate::fleet::unknown_api))
        .route("/metrics", get(metrics))
        .fallback(get(console))
        .layer(axum::middleware::from_fn_with_state(state.clone(), guard))
        .with_state(state)
}

async fn console(uri: axum::http::Uri) -> Response {
    crate::console::asset(uri.path())
}

/// What `/metrics` says of the served store and its recording.
fn store_scrape(state: &State) -> crate::metrics::Scrape {
    // A store that cannot be read: wirevault_store_up 0, and no size, file
    // count or horizon (not those of an empty store).
    let cat = state.view.catalog().ok();
    let span = cat.as_ref().and_then(|c| c.span);
    crate::metrics::Scrape {
        recording: state.live.as_ref().and_then(|b| b.latest()),
        store: cat.as_ref().map(|c| (c.bytes, c.files() as u64)),
        oldest_ns: span.map(|s| s.0),
        newest_ns: span.map(|s| s.1),
        volume: state.view.space(),
        started_unix: state.started_unix,
    }
}

async fn metrics(Ax(state): Ax<Arc<State>>, headers: axum::http::HeaderMap) -> Response {
    let open = headers
        .get(axum::http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("application/openmetrics-text"));
    // A fleet server serves no store of its own: its nodes' metrics, not a store's.
    let scrape: Box<dyn prometheus_client::collector::Collector> = match state.cfg.fleet.clone() {
        Some(fleet) => match tokio::task::spawn_blocking(move || crate::fleet::FleetScrape::of(&fleet)).await {
            Ok(f) => Box::new(f),
            Err(_) => return crate::api::ApiError::Internal("the fleet's status thread failed".into()).into_response(),
        },
        None => Box::new(store_scrape(&state)),
    };
    match crate::metrics::render(&state.metrics, scrape, !open) {
        Ok(text) => {
            let mut r = text.into_response();
            let kind = if open {
                "application/openmetrics-text; version=1.0.0; charset=utf-8"
            } else {
                "text/plain; version=0.0.4; charset=utf-8"
            };
            r.headers_mut().insert(axum::http::header::CONTENT_TYPE, axum::http::HeaderValue::from_static(kind));
            r
        }
        Err(_) => crate::api::ApiError::Internal("cannot encode the metrics".into()).into_response(),
    }
}

/// Every request: addressed to a name this server answers (no DNS
/// rebinding: see [`crate::host`]); only GET and HEAD; the token checked
/// for the API and metrics (the console's assets are public); logged and
/// counted once, when its answer ends (see [`crate::answer`]).
async fn guard(Ax(state): Ax<Arc<State>>, mut req: Request, next: Next) -> Response {
    use crate::api::ApiError;
    let started = Instant::now();
    let mut peer = req.extensions().get::<Peer>().cloned().unwrap_or_default();
    let link = req.extensions().get::<crate::conn::Conn>().map(|c| c.0.clone());
    let what = format!("{} {}", req.method(), req.uri().path_and_query().map_or("/", |p| p.as_str()));
    let head_only = req.method() == axum::http::Method::HEAD;
    let path = req.uri().path();
    let protected = path.starts_with("/api/") || path == "/metrics";
    let open = state.tokens.read().unwrap_or_else(|e| e.into_inner()).is_none()
        && state.cfg.tls.as_ref().is_none_or(|t| t.client_ca.is_none());
    let foreign = if open { foreign_host(&req, &state.cfg) } else { None };
    let mut note = String::new();
    let refused = if let Some(host) = foreign {
        note = format!(" host={host:?}");
        Some(ApiError::Misdirected(crate::host::misdirected(&host, state.cfg.listen)).into_response())
    } else if req.method() != axum::http::Method::GET && !head_only {
        Some(
            (
                axum::http::StatusCode::METHOD_NOT_ALLOWED,
                "only GET and HEAD are served; the API reads, it never changes the store".to_string(),
            )
                .into_response(),
        )
    } else if protected {
        let tokens = state.tokens.read().unwrap_or_else(|e| e.into_inner());
        match (tokens.as_ref(), crate::auth::presented(req.headers())) {
            (None, _) => None,
            (Some(_), None) => Some(
                ApiError::Unauthorized("this server needs a token: send Authorization: Bearer TOKEN".into())
                    .into_response(),
            ),
            (Some(t), Some(given)) => match t.check(given) {
                Some(name) => {
                    peer.token = Some(name.to_string());
                    None
                }
                None => {
                    Some(ApiError::Unauthorized("the token is not valid (mistyped or revoked)".into()).into_response())
                }
            },
        }
    } else {
        None
    };
    let answer = crate::answer::Answer { state: state.clone(), peer, what, note, started, link };
    let resp = match refused {
        Some(r) => r,
        None => {
            req.extensions_mut().insert(answer.peer.clone());
            // Logged as 499 if hyper drops this future (the client left) first.
            let mut pending = crate::answer::Unanswered(Some(answer));
            let resp = next.run(req).await;
            return match pending.0.take() {
                Some(answer) => answer.track(resp, head_only),
                None => resp,
            };
        }
    };
    answer.track(resp, head_only)
}

/// The name a request is addressed to (its `Host`, and the authority of
/// an absolute URI) when this server does not answer it.
fn foreign_host(req: &Request, cfg: &Config) -> Option<String> {
    let host = req.headers().get(axum::http::header::HOST).map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    let names = [req.uri().authority().map(|a| a.as_str().to_string()), host];
    names.into_iter().flatten().find(|n| !crate::host::answered(n, cfg.listen, &cfg.allowed_hosts))
}

async fn accept_loop(
    listener: tokio::net::TcpListener,
    state: Arc<State>,
    tls: Arc<RwLock<Option<tokio_rustls::TlsAcceptor>>>,
    mut shutdown: tokio::sync::oneshot::Receiver<()>,
) {
    let app = router(state.clone());
    let conns = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let per_address = Arc::new(PerAddress::default());
    let mut refusals = Refusals::default();
    let mut summary = tokio::time::interval(REFUSALS_SAID_EVERY);
    summary.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let permit = tokio::select! {
            _ = &mut shutdown => return,
            p = conns.clone().acquire_owned() => match p { Ok(p) => p, Err(_) => return },
        };
        let (tcp, addr) = tokio::select! {
            _ = &mut shutdown => return,
            _ = summary.tick() => {
                refusals.summarize(&state.cfg.log);
                continue;
            }
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    // Out of descriptors and the like: wait, do not spin.
                    (state.cfg.log)(LogLevel::Warning, &format!("api: accept failed: {e}"));
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let _ = tcp.set_nodelay(true);
        let Some(slot) = per_address.take(addr.ip()) else {
            drop(permit);
            let plain = tls.read().unwrap_or_else(|e| e.into_inner()).is_none();
            refusals.refused(&state.metrics, &state.cfg.log, addr.ip(), plain);
            if plain {
                tokio::spawn(refuse_busy(tcp));
            }
            continue;
        };
        // Subscribed before the acceptor is read: a reload between the two
        // (or during the handshake) retires this connection too.
        let retire = state.retire_tls.subscribe();
        let acceptor = tls.read().unwrap_or_else(|e| e.into_inner()).clone();
        let (app, state) = (app.clone(), state.clone());
        tokio::spawn(async move {
            let (_permit, _slot) = (permit, slot);
            let mut peer = Peer { addr: Some(addr), ..Peer::default() };
            let io = crate::conn::Watched::new(tcp);
            let link = io.link();
            match acceptor {
                None => crate::conn::serve(TokioIo::new(io), link, app, peer, state, None).await,
                Some(acc) => match tokio::time::timeout(Duration::from_secs(10), acc.accept(io)).await {
                    Ok(Ok(s)) => {
                        peer.cert = s.get_ref().1.peer_certificates().and_then(|c| c.first()).map(crate::tls::subject);
                        crate::conn::serve(TokioIo::new(s), link, app, peer, state, Some(retire)).await
                    }
                    Ok(Err(e)) => (state.cfg.log)(LogLevel::Info, &format!("api: {addr} TLS handshake refused: {e}")),
                    Err(_) => (state.cfg.log)(LogLevel::Info, &format!("api: {addr} TLS handshake timed out")),
                },
            }
        });
    }
}

/// How often refused connections are said in the log at most: each is
/// counted (503) at once, but a flood would fill the log line by line.
const REFUSALS_SAID_EVERY: Duration = Duration::from_secs(10);

/// Connections refused past [`MAX_PER_ADDRESS`], for the log: the first of
/// a burst is said at once, the rest in one line per [`REFUSALS_SAID_EVERY`].
#[derive(Default)]
struct Refusals {
    said: Option<Instant>,
    unsaid: u64,
}

impl Refusals {
    /// One refused connection from `ip`: answered 503 (`plain`) or closed (TLS).
    fn refused(&mut self, metrics: &ApiMetrics, log: &crate::LogFn, ip: std::net::IpAddr, plain: bool) {
        if plain {
            metrics.request(503);
        }
        if self.said.is_some_and(|t| t.elapsed() < REFUSALS_SAID_EVERY) {
            self.unsaid += 1;
            return;
        }
        self.summarize(log);
        self.said = Some(Instant::now());
        let how = if plain { "refused (503)" } else { "closed before the TLS handshake" };
        log(
            LogLevel::Info,
            &format!(
                "api: {ip} holds {MAX_PER_ADDRESS} connections already: more from it are {how} until it closes some"
            ),
        );
    }

    /// Says the refusals not said yet.
    fn summarize(&mut self, log: &crate::LogFn) {
        if self.unsaid > 0 {
            log(
                LogLevel::Info,
                &format!(
                "api: {} more connection(s) refused since: their client addresses held {MAX_PER_ADDRESS} connections each",
                self.unsaid
            ));
            self.unsaid = 0;
        }
    }
}

/// An empty store (a directory with an empty catalog) in the temporary directory, removed
/// when dropped, and the state handlers see on it: for unit tests of their work.
#[cfg(test)]
pub(crate) struct TestStore(pub std::path::PathBuf);

#[cfg(test)]
impl TestStore {
    pub(crate) fn new(name: &str) -> TestStore {
        let dir = std::env::temp_dir().join(format!("wv-serve-unit-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(wv_store::layout::CATALOG), "").unwrap();
        TestStore(dir)
    }

    pub(crate) fn state(&self) -> State {
        State::for_tests(Config::new(self.0.clone(), "127.0.0.1:0".parse().unwrap(), Arc::new(|_, _: &str| {})))
    }
}

#[cfg(test)]
impl Drop for TestStore {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
impl State {
    /// What the handlers see, without a listener or a recording.
    pub(crate) fn for_tests(cfg: Config) -> State {
        State {
            damaged: Default::default(),
            retire_tls: tokio::sync::watch::Sender::new(0),
            client_files: std::sync::Mutex::new(None),
            view: StoreView::new(&cfg.store),
            queries: Arc::new(Semaphore::new(cfg.max_queries)),
            cfg,
            live: None,
            tokens: RwLock::new(None),
            metrics: ApiMetrics::new(),
            started: Instant::now(),
            started_unix: 0.0,
        }
    }
}

impl State {
    /// `GET /api/v1/status` (503 with the reason when the store cannot be read).
    pub(crate) fn status(&self) -> Result<crate::status::Status, crate::api::ApiError> {
        let limits = crate::status::Limits {
            max_queries: self.cfg.max_queries,
            max_bytes: self.cfg.max_bytes,
            queries_running: self.cfg.max_queries - self.queries.available_permits(),
        };
        let uptime_s = (self.started.elapsed().as_secs_f64() * 10.0).round() / 10.0;
        store_status(&self.view, &self.cfg.store, self.live.as_ref(), uptime_s, limits)
    }
}

/// The status of the store `view` shows (at `store`), recorded into by `live` if any (a fleet
/// server's local nodes have no live recording and their own view).
pub(crate) fn store_status(
    view: &StoreView,
    store: &std::path::Path,
    live: Option<&Arc<LiveCounters>>,
    uptime_s: f64,
    limits: crate::status::Limits,
) -> Result<crate::status::Status, crate::api::ApiError> {
    use crate::store_view::time;
    let cat = view.catalog().map_err(crate::api::ApiError::Unavailable)?;
    let rec = live.and_then(|b| b.latest());
    let volumes = view.volumes();
    let space = crate::store_view::total_space(&volumes);
    let last = if live.is_none() { read_stats(store) } else { None };
    // The write rate: the recording's now, else the stored average.
    let live_rate = rec.as_ref().filter(|r| r.state == crate::RecordingState::Capturing).map(|r| r.disk_mb_s * 1e6);
    let avg_rate = cat.span.filter(|(a, b)| b > a).map(|(a, b)| cat.bytes as f64 / ((b - a) as f64 / 1e9));
    let (rate, rate_from) = match (live_rate, avg_rate) {
        (Some(r), _) if r > 0.0 => (Some(r), "current"),
        (_, Some(r)) => (Some(r), "average of the stored files"),
        _ => (None, "none"),
    };
    let budget = rec.as_ref().and_then(|r| r.budget_bytes);
    let capacity = budget.or(space.map(|(free, _)| free + cat.bytes));
    let hours = |bytes: Option<u64>| rate.zip(bytes).map(|(r, b)| (b as f64 / r / 3600.0 * 100.0).round() / 100.0);
    let (deleted_files, deleted_bytes) =
        rec.as_ref().map_or((0, 0), |r| (r.total.files_deleted, r.total.bytes_deleted));
    use crate::status::{Disk, Horizon, LiveRecording, Retention, Starting, Status, Volume};
    let on_full = rec.as_ref().and_then(|r| r.on_full.clone());
    let deletes = budget.is_some() && on_full.as_deref() == Some("delete");
    Ok(Status {
        version: env!("CARGO_PKG_VERSION").to_string(),
        uptime_s,
        store: store.display().to_string(),
        // In a recorder before its first second: starting.
        recording: match (live, &rec) {
            (Some(_), None) => Some(LiveRecording::Starting { state: Starting::Starting }),
            (_, r) => r.as_deref().map(|r| LiveRecording::Counters(Box::new(r.clone()))),
        },
        last_recording: last,
        disk: Disk {
            store_bytes: cat.bytes,
            files: cat.files(),
            packets: cat.packets,
            volume_free_bytes: space.map(|s| s.0),
            volume_size_bytes: space.map(|s| s.1),
            volumes: volumes
                .iter()
                .map(|v| Volume {
                    path: v.path.display().to_string(),
                    free_bytes: v.space.map(|s| s.0),
                    size_bytes: v.space.map(|s| s.1),
                })
                .collect(),
        },
        retention: Retention {
            budget_bytes: budget,
            on_full,
            files_deleted: deleted_files,
            bytes_deleted: deleted_bytes,
        },
        horizon: Horizon {
            oldest_ns: cat.span.map(|s| s.0),
            oldest: cat.span.map(|s| time(s.0)),
            newest_ns: cat.span.map(|s| s.1),
            newest: cat.span.map(|s| time(s.1)),
            span_s: cat.span.map(|(a, b)| b.saturating_sub(a) as f64 / 1e9),
            write_rate_bytes_s: rate.map(f64::round),
            rate_from: rate_from.to_string(),
            capacity_bytes: capacity,
            holds_hours: hours(capacity),
            full_in_hours: if deletes { None } else { hours(capacity.map(|c| c.saturating_sub(cat.bytes))) },
        },
        limits,
    })
}

/// The counters the last recording left in `STORE/stats.json` (none when it is not a
/// recording's report this version reads).
fn read_stats(store: &std::path::Path) -> Option<crate::Recording> {
    let text = std::fs::read_to_string(store.join(wv_store::layout::STATS)).ok()?;
    crate::Recording::parse(text.trim_end()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_refusal_is_counted_and_a_burst_said_in_two_lines() {
        let lines = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
        let l = lines.clone();
        let log: crate::LogFn = Arc::new(move |_, s: &str| l.lock().unwrap().push(s.to_string()));
        let metrics = ApiMetrics::new();
        let mut r = Refusals::default();
        let ip: std::net::IpAddr = [127, 0, 0, 1].into();
        for _ in 0..36 {
            r.refused(&metrics, &log, ip, true);
        }
        r.refused(&metrics, &log, ip, false);
        assert_eq!(lines.lock().unwrap().len(), 1, "{:?}", lines.lock().unwrap());
        r.summarize(&log);
        r.summarize(&log);
        let said = lines.lock().unwrap().clone();
        assert_eq!(said.len(), 2, "{said:?}");
        assert!(said[0].contains("127.0.0.1 holds 64 connections already") && said[0].contains("refused (503)"));
        assert!(said[1].contains("36 more connection(s) refused"), "{said:?}");
        let text = crate::metrics::render(&metrics, Box::new(crate::metrics::Scrape::default()), true).unwrap();
        assert!(text.contains("wirevault_http_requests_total{code=\"503\"} 36"), "{text}");
    }

    #[test]
    fn clients_are_counted_by_ipv4_address_or_ipv6_slash_64() {
        let key = |s: &str| PerAddress::key(s.parse().unwrap()).to_string();
        assert_eq!(key("192.0.2.7"), "192.0.2.7");
        assert_eq!(key("::ffff:192.0.2.7"), "192.0.2.7");
        assert_eq!(key("2001:db8:1:2:aaaa:bbbb:cccc:dddd"), "2001:db8:1:2::");
        assert_eq!(key("2001:db8:1:2::1"), key("2001:db8:1:2:ffff::9"));
        assert_ne!(key("2001:db8:1:2::1"), key("2001:db8:1:3::1"));
    }

    #[test]
    fn an_address_holds_at_most_its_share_of_connections() {
        let per = Arc::new(PerAddress::default());
        let ip: std::net::IpAddr = "192.0.2.7".parse().unwrap();
        let slots: Vec<AddressSlot> = (0..MAX_PER_ADDRESS).map(|_| per.take(ip).unwrap()).collect();
        assert!(per.take(ip).is_none());
        // Another address is not held back, and a closed connection frees its slot.
        assert!(per.take("192.0.2.8".parse().unwrap()).is_some());
        drop(slots);
        assert!(per.take(ip).is_some());
    }

    #[test]
    fn the_status_of_an_empty_store_has_no_rate_nor_horizon() {
        let store = TestStore::new("status-empty");
        let s = store.state().status().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((s.recording, s.disk.files, s.disk.packets, s.horizon.oldest_ns), (None, 0, 0, None));
        assert_eq!((s.horizon.rate_from.as_str(), s.horizon.holds_hours), ("none", None));
        assert_eq!((s.limits.max_queries, s.limits.queries_running), (4, 0));
    }

    #[test]
    fn a_recording_gives_its_state_rate_and_how_long_the_budget_holds() {
        let store = TestStore::new("status-live");
        let mut state = store.state();
        let live = crate::LiveCounters::new();
        state.live = Some(live.clone());
        let s = state.status().unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(s.recording, Some(crate::status::LiveRecording::Starting { .. })));
        let rec = |on_full: &str| crate::Recording {
            state: crate::RecordingState::Capturing,
            disk_mb_s: 2.0,
            budget_bytes: Some(7_200_000_000),
            on_full: Some(on_full.into()),
            ..Default::default()
        };
        live.publish(rec("delete"));
        let h = state.status().unwrap_or_else(|e| panic!("{e}")).horizon;
        // 7.2 GB at 2 MB/s: one hour; a budget that deletes is never full.
        assert_eq!(
            (h.rate_from.as_str(), h.write_rate_bytes_s, h.capacity_bytes),
            ("current", Some(2e6), Some(7_200_000_000))
        );
        assert_eq!((h.holds_hours, h.full_in_hours), (Some(1.0), None));
        live.publish(rec("stop"));
        let h = state.status().unwrap_or_else(|e| panic!("{e}")).horizon;
        assert_eq!((h.holds_hours, h.full_in_hours), (Some(1.0), Some(1.0)));
    }
}
