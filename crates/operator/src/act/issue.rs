//! [`Step::IssueCertificate`]: operator-issued certificates made and written to their Secrets.
//!
//! The key is generated here and goes only into the Secret; the CA that signs is read from its
//! Secret at the moment of signing (never from a cache), so a restarted operator, or another
//! replica, signs with the CA the members already trust.

use etcd_operator_api::labels::{cluster_labels, member_labels};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::jiff::Timestamp;
use kube::Api;

use super::status::post_params;
use super::{ActContext, ActError};
use crate::plan::{IssuedCertificate, Observed, Signer};
use crate::security::{TLS_SECRET_TYPE, issuer};

/// Makes `what` and writes it to the Secret `secret`: created, or replaced when it exists.
pub async fn perform(
    ctx: &ActContext,
    secret: &str,
    what: &IssuedCertificate,
    observed: &Observed,
) -> Result<(), ActError> {
    let cluster = &observed.cluster;
    let ns = cluster.metadata.namespace.clone().unwrap_or_default();
    let name = cluster.metadata.name.clone().unwrap_or_default();
    let lifetimes = cluster
        .spec
        .tls
        .as_ref()
        .and_then(|t| t.operator_issued_lifetimes())
        .transpose()
        .map_err(|why| ActError::Certificate { why })?
        .ok_or_else(|| ActError::Certificate {
            why: "spec.tls has no operatorIssued side".to_string(),
        })?;
    let api: Api<Secret> = Api::namespaced(ctx.client.clone(), &ns);
    let now = Timestamp::now();
    let cluster_owner = crate::build::cluster_owner_reference(cluster).map_err(ActError::Build)?;
    let invalid = |why: String| ActError::Certificate { why };

    if *what == IssuedCertificate::Ca {
        let ca = issuer::new_ca(&name, &ns, now, lifetimes.ca).map_err(invalid)?;
        let object = tls_secret(
            secret,
            &ns,
            cluster_labels(&name),
            cluster_owner,
            issuer::ca_secret_data(&ca),
        );
        ctx.count_write("Secret");
        // Created, never replaced: a CA that exists is the one the members trust.
        api.create(&post_params(), &object)
            .await
            .map_err(|e| ActError::from_kube(format!("creating Secret {ns}/{secret}"), e))?;
        return Ok(());
    }

    let ca_name = issuer::ca_secret_name(&name);
    let ca_secret = api
        .get_opt(&ca_name)
        .await
        .map_err(|e| ActError::from_kube(format!("reading Secret {ns}/{ca_name}"), e))?
        .ok_or_else(|| ActError::NotObserved {
            what: format!("Secret {ns}/{ca_name} (the cluster's CA)"),
        })?;
    let ca = issuer::ca_from_secret(&ca_name, &ca_secret).map_err(invalid)?;
    let previous = issuer::previous_ca_from_secret(&ca_name, &ca_secret)
        .transpose()
        .map_err(invalid)?;
    let trusted = issuer::ca_bundle(&ca_secret).unwrap_or_else(|| ca.cert_pem.clone());
    // The CA Secret itself: a rotation starts or ends. Replaced with its resourceVersion, so
    // two operators (or a retry after a crash) cannot rotate twice.
    let rewrite_ca = |data, annotations: Option<std::collections::BTreeMap<String, String>>| {
        let mut object = ca_secret.clone();
        object.data = Some(data);
        if let Some(annotations) = annotations {
            object
                .metadata
                .annotations
                .get_or_insert_default()
                .extend(annotations);
        }
        object
    };
    match what {
        IssuedCertificate::RotateCa { token } => {
            if previous.is_some() {
                return Ok(()); // already rotating: the next pass sees it
            }
            let new = issuer::new_ca(&name, &ns, now, lifetimes.ca).map_err(invalid)?;
            let annotations = token.as_ref().map(|t| {
                std::collections::BTreeMap::from([(
                    issuer::ROTATED_FOR_ANNOTATION.to_string(),
                    t.clone(),
                )])
            });
            let object = rewrite_ca(issuer::rotating_ca_secret_data(&new, &ca), annotations);
            ctx.count_write("Secret");
            api.replace(&ca_name, &post_params(), &object)
                .await
                .map_err(|e| ActError::from_kube(format!("updating Secret {ns}/{ca_name}"), e))?;
            return Ok(());
        }
        IssuedCertificate::DropPreviousCa => {
            if previous.is_none() {
                return Ok(());
            }
            let object = rewrite_ca(issuer::ca_secret_data(&ca), None);
            ctx.count_write("Secret");
            api.replace(&ca_name, &post_params(), &object)
                .await
                .map_err(|e| ActError::from_kube(format!("updating Secret {ns}/{ca_name}"), e))?;
            return Ok(());
        }
        _ => {}
    }
    let signer_of = |signer: &Signer| -> Result<&issuer::CaMaterial, ActError> {
        match signer {
            Signer::Current => Ok(&ca),
            Signer::Previous => previous.as_ref().ok_or_else(|| ActError::Certificate {
                why: format!("Secret {ca_name} holds no previous CA to sign with"),
            }),
        }
    };
    let (labels, owner, data) = match what {
        IssuedCertificate::Member {
            member,
            uid,
            signer,
        } => {
            let leaf = issuer::issue_member(
                signer_of(signer)?,
                member,
                &name,
                &ns,
                &observed.settings.cluster_domain,
                now,
                lifetimes.certificate,
            )
            .map_err(invalid)?;
            let owner = OwnerReference {
                api_version: "etcd-operator.cozystack.io/v1alpha2".to_string(),
                kind: "EtcdMember".to_string(),
                name: member.clone(),
                uid: uid.clone(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            };
            (
                member_labels(&name, member),
                owner,
                issuer::member_secret_data(&trusted, &leaf),
            )
        }
        IssuedCertificate::OperatorClient { signer } => {
            let leaf = issuer::issue_operator_client(
                signer_of(signer)?,
                &name,
                now,
                lifetimes.certificate,
            )
            .map_err(invalid)?;
            (
                cluster_labels(&name),
                cluster_owner,
                issuer::operator_client_secret_data(&trusted, &leaf),
            )
        }
        IssuedCertificate::Ca
        | IssuedCertificate::RotateCa { .. }
        | IssuedCertificate::DropPreviousCa => unreachable!("handled above"),
    };
    let mut object = tls_secret(secret, &ns, labels, owner, data);
    let current = api
        .get_opt(secret)
        .await
        .map_err(|e| ActError::from_kube(format!("reading Secret {ns}/{secret}"), e))?;
    ctx.count_write("Secret");
    match current {
        None => {
            api.create(&post_params(), &object)
                .await
                .map_err(|e| ActError::from_kube(format!("creating Secret {ns}/{secret}"), e))?;
        }
        Some(current) => {
            // The resourceVersion makes the replacement fail if the Secret changed meanwhile.
            object.metadata.resource_version = current.metadata.resource_version;
            api.replace(secret, &post_params(), &object)
                .await
                .map_err(|e| ActError::from_kube(format!("updating Secret {ns}/{secret}"), e))?;
        }
    }
    Ok(())
}

fn tls_secret(
    name: &str,
    namespace: &str,
    labels: std::collections::BTreeMap<String, String>,
    owner: OwnerReference,
    data: std::collections::BTreeMap<String, k8s_openapi::ByteString>,
) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(namespace.to_string()),
            labels: Some(labels),
            owner_references: Some(vec![owner]),
            ..Default::default()
        },
        type_: Some(TLS_SECRET_TYPE.to_string()),
        data: Some(data),
        ..Default::default()
    }
}
