//! Generates the server side of our own declarations of etcd's gRPC API (proto/) with protoc.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/etcdserverpb.proto");
    tonic_prost_build::configure()
        .build_client(false)
        .build_server(true)
        .compile_protos(&["proto/etcdserverpb.proto"], &["proto"])?;
    Ok(())
}
