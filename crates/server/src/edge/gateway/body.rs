//! A stream's requests read from its HTTP body: JSON values one after the other, read as
//! their bytes arrive (etcd's gateway takes a bidirectional stream's requests so).
//!
//! Invariant: as etcd's gateway, a value it cannot read ends the requests without an
//! error (the answers already asked for go on), and so does a body that ends, fails or
//! holds more than the size bound without completing a value.

use axum::body::Body;
use futures::{Stream, StreamExt};
use serde::de::DeserializeOwned;
use tonic::Status;

use super::json::Values;

/// The requests in `body`, none larger than `max_bytes` of JSON.
pub fn requests<T>(
    body: Body,
    max_bytes: usize,
) -> impl Stream<Item = Result<T, Status>> + Send + Unpin + 'static
where
    T: DeserializeOwned + Send + 'static,
{
    let state = (body.into_data_stream(), Values::default(), false);
    Box::pin(futures::stream::unfold(
        state,
        move |(mut data, mut values, mut ended)| async move {
            loop {
                match values.take_value::<T>() {
                    Ok(Some(v)) => return Some((Ok(v), (data, values, ended))),
                    Ok(None) if ended || values.len() > max_bytes => return None,
                    Ok(None) => {}
                    Err(_) => return None,
                }
                match data.next().await {
                    Some(Ok(bytes)) => values.push(&bytes),
                    Some(Err(_)) | None => ended = true,
                }
            }
        },
    ))
}
