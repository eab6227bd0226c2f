//! Generates, with protoc, the server side of our own declarations of etcd's gRPC API
//! (`proto/etcdserverpb.proto`) and both sides of the hub's registration API
//! (`proto/hub.proto`).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/etcdserverpb.proto");
    println!("cargo:rerun-if-changed=proto/hub.proto");
    tonic_prost_build::configure()
        .build_client(false)
        .build_server(true)
        .compile_protos(&["proto/etcdserverpb.proto"], &["proto"])?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_protos(&["proto/hub.proto"], &["proto"])?;
    Ok(())
}
