//! The one module with `unsafe`: ioctls, AF_PACKET, `recvmmsg`/`sendmmsg`, privilege drop.
//! Every `unsafe` block carries a `// SAFETY:` comment.
