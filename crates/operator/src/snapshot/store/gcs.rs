//! GCS writes: the JSON API's resumable upload, as a `MultipartUpload` so the controller
//! streams into GCS exactly as into the other stores (`WriteMultipart`, bounded parts).
//!
//! `POST {endpoint}/upload/storage/v1/b/<bucket>/o?uploadType=resumable` with the object's
//! metadata opens a session; each part is a `PUT <session>` with `Content-Range: bytes
//! a-b/*`, in order (a resumable upload is sequential: parts that `WriteMultipart` runs at
//! the same time wait for their turn); `PUT <session>` with `Content-Range: bytes */<size>`
//! finishes it. Until then the object does not exist; an abandoned session expires (GCS keeps
//! one a week), and `DELETE <session>` cancels it. The bearer token comes from object_store's
//! GCS credential provider (a self-signed JWT from the service account key), the HTTP client
//! from object_store's connector with the store's client options.

use std::sync::Arc;

use http::{Method, Request, StatusCode};
use object_store::client::{HttpClient, HttpConnector, HttpRequestBody, ReqwestConnector};
use object_store::gcp::GcpCredentialProvider;
use object_store::{ClientOptions, MultipartUpload, PutPayload, PutResult, UploadPart};
use tokio::sync::watch;

/// Put into the error of a session that could not be opened because the bucket is missing,
/// so that the classification names the bucket (a 404 there can mean nothing else).
pub const BUCKET_NOT_FOUND_MARK: &str = "GcsBucketNotFound";

/// Opens resumable uploads into one bucket.
#[derive(Clone, Debug)]
pub struct ResumableUploads {
    endpoint: String,
    bucket: String,
    credentials: GcpCredentialProvider,
    client: HttpClient,
}

/// Percent-encodes a query value or path segment.
fn encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// A message with anything that looks like key material cut out (the service account key's
/// parse errors can quote it).
pub fn without_secrets(text: &str) -> String {
    let cut = text
        .find("-----BEGIN")
        .or_else(|| text.find("private_key\":"))
        .unwrap_or(text.len());
    text[..cut].chars().take(200).collect()
}

pub(crate) fn error(
    status: StatusCode,
    path: &str,
    body: &str,
    opening: bool,
) -> object_store::Error {
    let body: String = body.chars().take(300).collect();
    let source = format!("{status}: {body}").into();
    match status {
        StatusCode::UNAUTHORIZED => object_store::Error::Unauthenticated {
            path: path.to_string(),
            source,
        },
        StatusCode::FORBIDDEN => object_store::Error::PermissionDenied {
            path: path.to_string(),
            source,
        },
        StatusCode::NOT_FOUND if opening => object_store::Error::NotFound {
            path: path.to_string(),
            source: format!("{BUCKET_NOT_FOUND_MARK}: {status}: {body}").into(),
        },
        _ => object_store::Error::Generic {
            store: "GCS",
            source,
        },
    }
}

fn transport(e: impl std::error::Error + Send + Sync + 'static) -> object_store::Error {
    object_store::Error::Generic {
        store: "GCS",
        source: Box::new(e),
    }
}

impl ResumableUploads {
    pub fn new(
        endpoint: &str,
        bucket: &str,
        credentials: GcpCredentialProvider,
        options: &ClientOptions,
    ) -> Result<ResumableUploads, object_store::Error> {
        Ok(ResumableUploads {
            endpoint: endpoint.trim_end_matches('/').to_string(),
            bucket: bucket.to_string(),
            credentials,
            client: ReqwestConnector::default().connect(options)?,
        })
    }

    /// Sends `request` with the bearer token; (status, body, Location header).
    async fn send(
        &self,
        mut request: Request<HttpRequestBody>,
    ) -> Result<(StatusCode, String, Option<String>), object_store::Error> {
        let credential = self.credentials.get_credential().await?;
        if !credential.bearer.is_empty() {
            let value = format!("Bearer {}", credential.bearer)
                .parse()
                .map_err(transport)?;
            request
                .headers_mut()
                .insert(http::header::AUTHORIZATION, value);
        }
        let response = self.client.execute(request).await.map_err(transport)?;
        let status = response.status();
        let location = response
            .headers()
            .get(http::header::LOCATION)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let body = response.into_body().bytes().await.map_err(transport)?;
        Ok((
            status,
            String::from_utf8_lossy(&body).into_owned(),
            location,
        ))
    }

    /// Opens a resumable upload of `key` whose object will carry `metadata`.
    pub async fn start(
        &self,
        key: &str,
        metadata: &[(String, String)],
    ) -> Result<ResumableUpload, object_store::Error> {
        let url = format!(
            "{}/upload/storage/v1/b/{}/o?uploadType=resumable&name={}",
            self.endpoint,
            encode(&self.bucket),
            encode(key)
        );
        let metadata: serde_json::Map<String, serde_json::Value> = metadata
            .iter()
            .map(|(k, v)| (k.clone(), serde_json::Value::from(v.clone())))
            .collect();
        let body = serde_json::json!({
            "name": key,
            "contentType": "application/octet-stream",
            "metadata": metadata,
        });
        let request = Request::builder()
            .method(Method::POST)
            .uri(&url)
            .header(
                http::header::CONTENT_TYPE,
                "application/json; charset=UTF-8",
            )
            .header("X-Upload-Content-Type", "application/octet-stream")
            .body(HttpRequestBody::from(body.to_string()))
            .map_err(transport)?;
        let (status, text, location) = self.send(request).await?;
        if !status.is_success() {
            return Err(error(status, key, &text, true));
        }
        let session = location.ok_or_else(|| object_store::Error::Generic {
            store: "GCS",
            source: "the resumable upload was opened without a session URI (no Location header)"
                .into(),
        })?;
        let (progress, _) = watch::channel(Progress::default());
        Ok(ResumableUpload {
            shared: Arc::new(Shared {
                uploads: self.clone(),
                session,
                key: key.to_string(),
                progress,
            }),
            next: 0,
            offset: 0,
        })
    }
}

/// How far the parts of one upload got.
#[derive(Clone, Copy, Debug, Default)]
struct Progress {
    /// Parts sent and acknowledged, in order.
    parts: usize,
    /// A part failed or the upload was aborted: the later parts give up.
    failed: bool,
}

#[derive(Debug)]
struct Shared {
    uploads: ResumableUploads,
    /// The session URI (it authorizes the upload: never printed).
    session: String,
    key: String,
    progress: watch::Sender<Progress>,
}

impl Shared {
    async fn put(
        &self,
        body: HttpRequestBody,
        range: String,
    ) -> Result<(StatusCode, String), object_store::Error> {
        let request = Request::builder()
            .method(Method::PUT)
            .uri(&self.session)
            .header(http::header::CONTENT_RANGE, range)
            .body(body)
            .map_err(transport)?;
        let (status, text, _) = self.uploads.send(request).await?;
        Ok((status, text))
    }
}

/// One resumable upload: parts in order, then the final size.
#[derive(Debug)]
pub struct ResumableUpload {
    shared: Arc<Shared>,
    /// The index the next part gets.
    next: usize,
    /// Bytes handed to parts so far.
    offset: u64,
}

/// GCS answers a part of an unfinished upload with 308 (Resume Incomplete).
fn part_accepted(status: StatusCode) -> bool {
    status == StatusCode::PERMANENT_REDIRECT || status.is_success()
}

#[async_trait::async_trait]
impl MultipartUpload for ResumableUpload {
    fn put_part(&mut self, data: PutPayload) -> UploadPart {
        let index = self.next;
        self.next += 1;
        let start = self.offset;
        let len = data.content_length() as u64;
        self.offset += len;
        let shared = self.shared.clone();
        Box::pin(async move {
            let mut turn = shared.progress.subscribe();
            loop {
                let now = *turn.borrow_and_update();
                if now.failed {
                    return Err(object_store::Error::Generic {
                        store: "GCS",
                        source: "an earlier part of the upload failed".into(),
                    });
                }
                if now.parts == index {
                    break;
                }
                turn.changed().await.map_err(transport)?;
            }
            let range = if len == 0 {
                format!("bytes */{start}")
            } else {
                format!("bytes {start}-{}/*", start + len - 1)
            };
            let result = shared
                .put(HttpRequestBody::from(data), range)
                .await
                .and_then(|(status, text)| {
                    if part_accepted(status) {
                        Ok(())
                    } else {
                        Err(error(status, &shared.key, &text, false))
                    }
                });
            shared.progress.send_modify(|p| match &result {
                Ok(()) => p.parts += 1,
                Err(_) => p.failed = true,
            });
            result
        })
    }

    async fn complete(&mut self) -> object_store::Result<PutResult> {
        let now = *self.shared.progress.borrow();
        if now.failed || now.parts != self.next {
            return Err(object_store::Error::Generic {
                store: "GCS",
                source: format!(
                    "the upload cannot be finished: {} of {} parts were stored",
                    now.parts, self.next
                )
                .into(),
            });
        }
        let (status, text) = self
            .shared
            .put(HttpRequestBody::empty(), format!("bytes */{}", self.offset))
            .await?;
        if !status.is_success() {
            return Err(error(status, &self.shared.key, &text, false));
        }
        Ok(PutResult {
            e_tag: None,
            version: None,
            extensions: Default::default(),
        })
    }

    async fn abort(&mut self) -> object_store::Result<()> {
        self.shared.progress.send_modify(|p| p.failed = true);
        let request = Request::builder()
            .method(Method::DELETE)
            .uri(&self.shared.session)
            .body(HttpRequestBody::empty())
            .map_err(transport)?;
        // GCS answers a cancelled session with 499; an emulator may not know DELETE. Either
        // way the object was never finished, so it does not exist.
        let _ = self.shared.uploads.send(request).await;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_percent_encoded() {
        assert_eq!(encode("prod/etcd/x.db"), "prod%2Fetcd%2Fx.db");
        assert_eq!(encode("a b+c"), "a%20b%2Bc");
        assert_eq!(encode("plain-name_1.db"), "plain-name_1.db");
    }

    #[test]
    fn key_material_never_reaches_a_message() {
        let text =
            "Error decoding credentials: {\"private_key\": \"-----BEGIN PRIVATE KEY-----\\nMIIE";
        let clean = without_secrets(text);
        assert!(
            !clean.contains("BEGIN") && !clean.contains("MIIE"),
            "{clean}"
        );
        assert_eq!(without_secrets("plain"), "plain");
    }

    #[test]
    fn answers_become_object_store_errors() {
        let kind = |status: u16, opening: bool| match error(
            StatusCode::from_u16(status).unwrap(),
            "k",
            "body",
            opening,
        ) {
            object_store::Error::Unauthenticated { .. } => "Unauthenticated",
            object_store::Error::PermissionDenied { .. } => "PermissionDenied",
            object_store::Error::NotFound { .. } => "NotFound",
            _ => "Generic",
        };
        assert_eq!(kind(401, false), "Unauthenticated");
        assert_eq!(kind(403, true), "PermissionDenied");
        assert_eq!(kind(404, true), "NotFound");
        // A 404 of a part is not a missing bucket: the session is gone.
        assert_eq!(kind(404, false), "Generic");
        assert_eq!(kind(500, false), "Generic");
        let missing = error(StatusCode::NOT_FOUND, "k", "", true).to_string();
        assert!(missing.contains(BUCKET_NOT_FOUND_MARK), "{missing}");
        assert!(part_accepted(StatusCode::PERMANENT_REDIRECT));
        assert!(part_accepted(StatusCode::OK));
        assert!(!part_accepted(StatusCode::BAD_REQUEST));
    }
}
