//! The panic handler: name the component, say what and where, then fault so
//! the supervisor (the loader) reports it and may restart the component.

#[cfg(all(target_os = "none", not(test)))]
#[panic_handler]
fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
    use core::fmt::Write;
    let mut console = crate::console::Console;
    let _ = write!(console, "[{}] PANIC", crate::component_name());
    if let Some(location) = info.location() {
        let _ = write!(console, " at {}:{}:{}", location.file(), location.line(), location.column());
    }
    let _ = writeln!(console, ": {}", info.message());
    crate::abort()
}
