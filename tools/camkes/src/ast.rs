//! The syntax tree of the CAmkES subset, as written (names not yet
//! resolved). Every node that a later error can point at keeps its position.

use crate::diag::Pos;

/// An identifier and where it was written.
#[derive(Clone, Debug, PartialEq)]
pub struct Name {
    /// The identifier.
    pub text: String,
    /// Its position.
    pub pos: Pos,
}

/// A top-level item of a file.
#[derive(Clone, Debug, PartialEq)]
pub enum Item {
    /// `import <x>;` or `import "x";`
    Import(Import),
    /// `procedure P { ... }`
    Procedure(Procedure),
    /// `component C { ... }`
    Component(Component),
    /// `connector K { ... }`
    Connector(Connector),
    /// `assembly { ... }`
    Assembly(Assembly),
}

/// Where an import looks for its file.
#[derive(Clone, Debug, PartialEq)]
pub enum ImportPath {
    /// `<path>`: searched in the import path (built-ins first).
    Builtin(String),
    /// `"path"`: relative to the importing file's directory only.
    Relative(String),
}

/// An import statement.
#[derive(Clone, Debug, PartialEq)]
pub struct Import {
    /// The `import` keyword.
    pub pos: Pos,
    /// What it names.
    pub path: ImportPath,
}

/// A procedure (RPC interface type).
#[derive(Clone, Debug, PartialEq)]
pub struct Procedure {
    /// Its name.
    pub name: Name,
    /// Its methods, in order; a method's index is its RPC label.
    pub methods: Vec<Method>,
}

/// A procedure method.
#[derive(Clone, Debug, PartialEq)]
pub struct Method {
    /// Its name.
    pub name: Name,
    /// The return type, or `None` for `void`.
    pub ret: Option<TypeName>,
    /// Its parameters.
    pub params: Vec<Param>,
}

/// A parameter's direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// `in` (also the default).
    In,
    /// `refin`: like `in`; upstream's C glue passes it by reference.
    Refin,
    /// `out`.
    Out,
    /// `inout`.
    Inout,
}

/// A method parameter.
#[derive(Clone, Debug, PartialEq)]
pub struct Param {
    /// Its direction.
    pub direction: Direction,
    /// Its type.
    pub ty: TypeName,
    /// Its name.
    pub name: Name,
    /// Whether it was written `name[]` (a variable-length array).
    pub array: bool,
}

/// A parameter or return type, normalised as upstream does (`integer` and
/// `signed int` become `int`, `unsigned` becomes `unsigned int`, `bool`
/// becomes `boolean`).
#[derive(Clone, Debug, PartialEq)]
pub struct TypeName {
    /// The normalised spelling.
    pub text: String,
    /// Where the type starts.
    pub pos: Pos,
}

/// A component type.
#[derive(Clone, Debug, PartialEq)]
pub struct Component {
    /// Its name.
    pub name: Name,
    /// Where `control;` was written, if it was.
    pub control: Option<Pos>,
    /// Where `hardware;` was written, if it was.
    pub hardware: Option<Pos>,
    /// Its interfaces, in declaration order.
    pub interfaces: Vec<InterfaceDecl>,
    /// Its attribute declarations.
    pub attributes: Vec<AttributeDecl>,
    /// `has mutex m;` and friends: (kind keyword, name).
    pub synchronisation: Vec<(String, Name)>,
}

/// The kind of an interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InterfaceKind {
    /// `provides`
    Provides,
    /// `uses`
    Uses,
    /// `emits`
    Emits,
    /// `consumes`
    Consumes,
    /// `dataport`
    Dataport,
}

impl InterfaceKind {
    /// The keyword that declares it.
    pub fn keyword(self) -> &'static str {
        match self {
            InterfaceKind::Provides => "provides",
            InterfaceKind::Uses => "uses",
            InterfaceKind::Emits => "emits",
            InterfaceKind::Consumes => "consumes",
            InterfaceKind::Dataport => "dataport",
        }
    }
}

/// The type of a dataport.
#[derive(Clone, Debug, PartialEq)]
pub enum DataportType {
    /// `Buf` (one page) or `Buf(size)`.
    Buf {
        /// The byte size if written (`Buf(8192)`), `None` for bare `Buf`.
        size: Option<i128>,
    },
    /// A C type name (`dataport MyFrame_t f;`).
    CType(String),
}

impl DataportType {
    /// The canonical spelling, as upstream compares types (`Buf(0x1000)`
    /// is `Buf(4096)`).
    pub fn spelling(&self) -> String {
        match self {
            DataportType::Buf { size: None } => "Buf".to_string(),
            DataportType::Buf { size: Some(n) } => format!("Buf({n})"),
            DataportType::CType(t) => t.clone(),
        }
    }
}

/// An interface declaration inside a component.
#[derive(Clone, Debug, PartialEq)]
pub struct InterfaceDecl {
    /// Its kind.
    pub kind: InterfaceKind,
    /// Whether it was declared `maybe` (may be left unconnected).
    pub maybe: bool,
    /// The type name: a procedure, an event type, or the dataport type's
    /// spelling.
    pub type_name: Name,
    /// The dataport type, for dataports.
    pub dataport: Option<DataportType>,
    /// Its name.
    pub name: Name,
}

/// The value type of an attribute.
#[derive(Clone, Debug, PartialEq)]
pub struct AttributeDecl {
    /// The type as written (normalised): `int`, `string`, `uint64_t`, ...
    pub ty: TypeName,
    /// Whether it is an array (`name[]`).
    pub array: bool,
    /// Its name.
    pub name: Name,
    /// Its default, if given.
    pub default: Option<Value>,
}

/// A user-defined connector (parsed so that files declaring one read as
/// upstream; only the built-in connectors can be used in connections).
#[derive(Clone, Debug, PartialEq)]
pub struct Connector {
    /// Its name.
    pub name: Name,
}

/// An `assembly` block.
#[derive(Clone, Debug, PartialEq)]
pub struct Assembly {
    /// The `assembly` keyword.
    pub pos: Pos,
    /// `component T name;` entries.
    pub instances: Vec<Instance>,
    /// `connection K name(...)` entries.
    pub connections: Vec<Connection>,
    /// `name.attr = value;` entries.
    pub settings: Vec<Setting>,
}

/// A component instance.
#[derive(Clone, Debug, PartialEq)]
pub struct Instance {
    /// The component type.
    pub type_name: Name,
    /// The instance name.
    pub name: Name,
}

/// Which side of a connection an end is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EndSide {
    /// `from`
    From,
    /// `to`
    To,
}

/// One end of a connection: `from inst.iface`.
#[derive(Clone, Debug, PartialEq)]
pub struct End {
    /// `from` or `to`.
    pub side: EndSide,
    /// The instance.
    pub instance: Name,
    /// The interface.
    pub interface: Name,
}

/// A connection.
#[derive(Clone, Debug, PartialEq)]
pub struct Connection {
    /// The connector.
    pub connector: Name,
    /// The connection's name.
    pub name: Name,
    /// Its ends, as written.
    pub ends: Vec<End>,
}

/// A configuration setting `target.attribute = value;`.
#[derive(Clone, Debug, PartialEq)]
pub struct Setting {
    /// An instance or connection name.
    pub target: Name,
    /// The attribute name.
    pub attribute: Name,
    /// The value.
    pub value: Value,
}

/// A literal value ("item" in upstream's grammar), with constant
/// expressions already folded.
#[derive(Clone, Debug, PartialEq)]
pub struct Value {
    /// The value.
    pub kind: ValueKind,
    /// Where it starts.
    pub pos: Pos,
}

/// The kinds of literal value.
#[derive(Clone, Debug, PartialEq)]
pub enum ValueKind {
    /// An integer (booleans are 1 and 0, as upstream).
    Int(i128),
    /// A float.
    Float(f64),
    /// A string (adjacent strings already concatenated).
    Str(String),
    /// A list.
    List(Vec<Value>),
    /// A dict.
    Dict(Vec<(Value, Value)>),
}

impl ValueKind {
    /// A short description for "expected an integer, found a string".
    pub fn describe(&self) -> &'static str {
        match self {
            ValueKind::Int(_) => "an integer",
            ValueKind::Float(_) => "a float",
            ValueKind::Str(_) => "a string",
            ValueKind::List(_) => "a list",
            ValueKind::Dict(_) => "a dict",
        }
    }
}
