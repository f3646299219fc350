//! The checker: resolves names (define before use), enforces upstream's
//! rules for components, connections and settings, applies this compiler's
//! stricter rules (unknown settings, rights a connector cannot give, page
//! sizes, one connection per interface), and produces a [`System`] that the
//! spec and glue emitters can trust.
//!
//! In stages, one module each: `model` is what a checked system is;
//! `resolve` defines the items in order (procedures, components, instances,
//! connections); `settings` reads the configuration once every assembly is
//! merged (`values` says what a value may be, `unsupported` why upstream
//! settings are left out); `checks` applies the rules that need the whole system (rights,
//! interrupts, instances of a type wired alike). [`check`] runs them.

mod checks;
mod clients;
mod model;
mod pools;
mod priorities;
mod resolve;
mod settings;
mod unsupported;
mod values;

pub use clients::{PerClient, PER_CLIENT};
pub use pools::TABLE as POOL_TABLE;

pub use model::{
    dataport_size, snake_case, ComponentType, ConnectionInfo, ConnectorKind, EndRef, InstanceConfig, InstanceInfo,
    IrqConfig, MmioConfig, System,
};

use crate::ast::{self, Item};
use crate::diag::{err, Pos, Result};
use std::collections::HashMap;
use std::sync::Arc;

/// What a top-level name is defined as.
#[derive(Clone)]
enum Defined {
    Procedure,
    Component(usize),
    UserConnector,
    Reserved,
}

/// The checker's state while it reads the items in order.
#[derive(Default)]
struct Checker {
    system: System,
    names: HashMap<String, (Defined, Pos)>,
    /// Every top-level definition anywhere, to explain forward references.
    later: HashMap<String, Pos>,
    std_imported: bool,
    /// Instance and connection names share one namespace, as upstream.
    assembly_names: HashMap<String, Pos>,
    connection_names: HashMap<String, usize>,
    instance_names: HashMap<String, usize>,
    /// Which connection already holds `(instance, interface)`.
    connected: HashMap<(usize, usize), (usize, Pos)>,
    /// Every setting of every assembly, in order; checked once all
    /// assemblies are merged.
    settings_store: Vec<ast::Setting>,
    first_assembly: Option<Pos>,
    root_file: Option<Arc<str>>,
    /// ELF (folder) name to the component type that has it.
    elves: HashMap<String, usize>,
    /// `(target, attribute)` of every setting to its index in
    /// `settings_store`, once all assemblies are merged.
    setting_index: HashMap<(String, String), usize>,
}

/// Checks the items of a whole system (as returned by
/// [`crate::imports::load`]).
/// `root_file` names the file that a whole-system error (no assembly) is
/// reported against.
pub fn check(items: Vec<Item>, root_file: &str) -> Result<System> {
    let mut checker = Checker { root_file: Some(Arc::from(root_file)), ..Checker::default() };
    for item in &items {
        let name = match item {
            Item::Procedure(p) => &p.name,
            Item::Component(c) => &c.name,
            Item::Connector(k) => &k.name,
            _ => continue,
        };
        checker.later.entry(name.text.clone()).or_insert(name.pos.clone());
    }
    for item in items {
        match item {
            Item::Import(import) => checker.import_std(&import.pos)?,
            Item::Procedure(p) => checker.define_procedure(p)?,
            Item::Component(c) => checker.define_component(c)?,
            Item::Connector(k) => checker.define(&k.name, Defined::UserConnector)?,
            Item::Assembly(a) => checker.add_assembly(a)?,
        }
    }
    checker.finish()
}

impl Checker {
    /// Once every item is read: the settings, then the whole-system rules.
    fn finish(mut self) -> Result<System> {
        let Some(assembly_pos) = self.first_assembly.clone() else {
            let file = self.root_file.clone().unwrap_or_else(|| Arc::from("<input>"));
            let pos = Pos { file, line: 1, col: 1 };
            return err(&pos, "no assembly: a system needs 'assembly { composition { ... } }'");
        };
        if self.system.instances.is_empty() {
            return err(&assembly_pos, "the assembly has no component instances");
        }
        {
            // Connections first: an instance setting is checked against what
            // they are (a hand-written id of a pool is refused).
            let mut instance_settings = Vec::new();
            for (index, s) in self.settings_store.clone().into_iter().enumerate() {
                let key = (s.target.text.clone(), s.attribute.text.clone());
                if let Some(&previous) = self.setting_index.get(&key) {
                    let previous = &self.settings_store[previous].attribute.pos;
                    return err(&s.attribute.pos, format!("'{}.{}' is already set at {previous}", key.0, key.1));
                }
                self.setting_index.insert(key, index);
                if let Some(&instance) = self.instance_names.get(&s.target.text) {
                    instance_settings.push((instance, s));
                } else if let Some(&connection) = self.connection_names.get(&s.target.text) {
                    self.connection_setting(connection, &s)?;
                } else {
                    return err(&s.target.pos, format!("unknown instance or connection '{}'", s.target.text));
                }
            }
            self.derive_pool_ids()?;
            for (instance, s) in instance_settings {
                self.instance_setting(instance, &s)?;
            }
        }
        self.resolve_restart_grants()?;
        let mut servers = self.system.instances.iter().filter_map(|i| i.config.log_server.as_ref().map(|p| (i, p)));
        if let (Some((first, _)), Some((_, pos))) = (servers.next(), servers.next()) {
            return err(pos, format!("a second log server: '{}' already is one", first.name.text));
        }
        self.check_instances()?;
        self.check_connections()?;
        self.check_call_graph()?;
        self.check_priorities()?;
        self.check_component_types()?;
        self.check_per_client()?;
        self.resolve_pool_ids()?;
        Ok(self.system)
    }
}
