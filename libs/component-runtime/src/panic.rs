//! The panic handler: name the component, say what and where, then fault so
//! the supervisor (the loader) reports it and may restart the component.

#[cfg(all(target_os = "none", not(test)))]
#[panic_handler]
fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
    // One line, into the log ring when there is one: the ring never
    // refuses a line (the oldest gives way), so the message is there for
    // the log server even when the component flooded it just before.
    match info.location() {
        Some(l) => crate::console::emit_line(format_args!(
            "PANIC at {}:{}:{}: {}",
            l.file(),
            l.line(),
            l.column(),
            info.message()
        )),
        None => crate::console::emit_line(format_args!("PANIC: {}", info.message())),
    };
    crate::abort()
}
