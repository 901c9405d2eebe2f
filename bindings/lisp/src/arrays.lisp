;;;; arrays.lisp - Lisp arrays to foreign pointers.
;;;;
;;;; Specialised simple vectors ((simple-array single-float (*)),
;;;; (simple-array double-float (*)), (simple-array (signed-byte 32) (*)),
;;;; ...) are passed in place: CFFI pins
;;;; them for the duration of the call (zero copy). Other sequences and 2-D
;;;; arrays (rows of coordinates) are copied into such a vector first. A CFFI
;;;; foreign pointer is passed through unchanged (host or, for the index API,
;;;; device memory).

(in-package #:knn-gpgpu)

(deftype float-vector () '(simple-array single-float (*)))
(deftype double-vector () '(simple-array double-float (*)))
(deftype int32-vector () '(simple-array (signed-byte 32) (*)))
(deftype int64-vector () '(simple-array (signed-byte 64) (*)))
(deftype octet-vector () '(simple-array (unsigned-byte 8) (*)))

(defconstant +int-max+ (1- (expt 2 31)))

(defun c-int (value name)
  "VALUE if it is an integer that fits a C int, else a KNN-USAGE-ERROR."
  (unless (and (integerp value) (<= (- (1+ +int-max+)) value +int-max+))
    (usage-error "~A = ~S is not an integer that fits a C int" name value))
  value)

(defun float-vector (data name)
  "DATA as a (simple-array single-float (*)): itself when it already is one,
else a converted copy. Accepts vectors, lists and arrays of any rank
(row-major)."
  (cond ((typep data 'float-vector) data)
        ((and (arrayp data) (not (vectorp data)))
         #+sbcl (if (typep data '(simple-array single-float))
                    (sb-ext:array-storage-vector data)
                    (float-vector-copy data name))
         #-sbcl (float-vector-copy data name))
        ((typep data 'sequence) (float-vector-copy data name))
        (t (usage-error "~A must be a sequence or array of reals, not ~S" name (type-of data)))))

(defmacro define-real-vector-copy (function-name element-type)
  "Define FUNCTION-NAME (data name): DATA, a sequence or an array of any rank (row-major),
as a fresh (simple-array ELEMENT-TYPE (*)), every element a real coerced to it."
  `(defun ,function-name (data name)
     (let* ((n (if (arrayp data) (array-total-size data) (length data)))
            (out (make-array n :element-type ',element-type)))
       (flet ((put (i x)
                (unless (realp x)
                  (usage-error "~A: element ~D is ~S, not a real number" name i x))
                (setf (aref out i) (coerce x ',element-type))))
         (if (arrayp data)
             (dotimes (i n) (put i (row-major-aref data i)))
             (let ((i 0)) (map nil (lambda (x) (put i x) (incf i)) data))))
       out)))

(define-real-vector-copy float-vector-copy single-float)
(define-real-vector-copy double-vector-copy double-float)

(defun integer-vector (data element-type name)
  "DATA as a simple vector of ELEMENT-TYPE ((signed-byte 32|64)), copied unless it is one."
  (if (typep data `(simple-array ,element-type (*)))
      data
      (let* ((n (length data))
             (out (make-array n :element-type element-type))
             (i 0))
        (map nil (lambda (x)
                   (unless (typep x element-type)
                     (usage-error "~A: element ~D is ~S, not of type ~S" name i x element-type))
                   (setf (aref out i) x)
                   (incf i))
             data)
        out)))

(defun scalar-of (data)
  "The precision DATA is computed in: :float64 for double-floats (a
(simple-array double-float) of any rank, or a sequence or array holding a
double-float), else :float32 (single-floats, and integers and rationals as
before float64 existed)."
  (flet ((doublep (x) (typep x 'double-float)))
    (cond ((typep data '(simple-array double-float)) :float64)
          ((typep data '(simple-array single-float)) :float32)
          ((and (arrayp data) (not (vectorp data)))
           (if (loop for i below (array-total-size data)
                     thereis (doublep (row-major-aref data i)))
               :float64 :float32))
          ((and (typep data 'sequence) (some #'doublep data)) :float64)
          (t :float32))))

(defun double-vector (data name)
  "DATA as a (simple-array double-float (*)): itself when it is one, else a
copy (every real converts; single-floats and integers exactly)."
  (cond ((typep data 'double-vector) data)
        #+sbcl ((typep data '(simple-array double-float)) (sb-ext:array-storage-vector data))
        ((or (arrayp data) (typep data 'sequence)) (double-vector-copy data name))
        (t (usage-error "~A must be a sequence or array of reals, not ~S" name (type-of data)))))

(defun exact-float-vector (data name)
  "DATA as single-floats, refusing to round: a double-float that is no
single-float signals a KNN-USAGE-ERROR (the index holds float32)."
  (let* ((v (double-vector data name))
         (out (make-array (length v) :element-type 'single-float)))
    (dotimes (i (length v) out)
      (let* ((x (aref v i))
             (f (and (<= (abs x) most-positive-single-float) (coerce x 'single-float))))
        (unless (and f (= (coerce f 'double-float) x))
          (usage-error "~A: element ~D (~S) is not a single-float, and this index holds ~
                        float32: build it from double-floats, or round the queries yourself"
                       name i x))
        (setf (aref out i) f)))))

(defun scalar-vector (data scalar name)
  "DATA as the vector SCALAR (:float32 or :float64) calls take: widening is
exact; narrowing only when nothing rounds (EXACT-FLOAT-VECTOR).
:ROUND-TO-FLOAT32 is the float32-only classic API's rule: every real rounds."
  (ecase scalar
    (:round-to-float32 (float-vector data name))
    (:float64 (double-vector data name))
    (:float32 (if (eq (scalar-of data) :float32) (float-vector data name)
                  (exact-float-vector data name)))))

(defun rows-of (data dim name &optional scalar)
  "Check and convert row data: a flat vector of n*DIM reals or an (n DIM)
array, in SCALAR (:float32, :float64 or :round-to-float32; NIL: the
data's, SCALAR-OF).
Returns (values vector n scalar)."
  (when (and (arrayp data) (= (array-rank data) 2) (/= (array-dimension data 1) dim))
    (usage-error "~A: expected ~D columns, got an array of dimensions ~S"
                 name dim (array-dimensions data)))
  (when (and (arrayp data) (> (array-rank data) 2))
    (usage-error "~A: expected a vector or a 2-D array, got dimensions ~S"
                 name (array-dimensions data)))
  (let* ((scalar (or scalar (scalar-of data)))
         (v (scalar-vector data scalar name)))
    (unless (and (plusp dim) (zerop (mod (length v) dim)))
      (usage-error "~A: ~D floats is not a whole number of rows of ~D"
                   name (length v) dim))
    (values v (floor (length v) dim) scalar)))

(defun scalar-element-type (scalar)
  "The Lisp element type of SCALAR's coordinates and squared distances."
  (ecase scalar (:float32 'single-float) (:float64 'double-float)))

(defun output-vector (given length element-type name)
  "GIVEN (checked: exact element type and length) or a fresh vector."
  (cond ((null given) (make-array length :element-type element-type))
        ((cffi:pointerp given) given)
        ((and (typep given `(simple-array ,element-type (*))) (= (length given) length)) given)
        (t (usage-error "~A must be a (simple-array ~S (~D)) or a foreign pointer"
                        name element-type length))))

(defun call-with-pointer (object function)
  (cond ((null object) (funcall function (cffi:null-pointer)))
        ((cffi:pointerp object) (funcall function object))
        (t (cffi:with-pointer-to-vector-data (pointer object)
             (funcall function pointer)))))

(defmacro with-pointers (bindings &body body)
  "Bind each VAR to a pointer to the data of its vector (pinned, zero copy),
NIL -> NULL, a foreign pointer -> itself."
  (if (null bindings)
      `(progn ,@body)
      (destructuring-bind ((var object) &rest more) bindings
        `(call-with-pointer ,object (lambda (,var) (with-pointers ,more ,@body))))))

(defmacro scalar-call ((scalar name-var float-name float-fn f64-fn) &body args)
  "Call FLOAT-FN or its _f64 twin F64-FN by SCALAR, with NAME-VAR bound to the
C name for CHECK-STATUS."
  `(if (eq ,scalar :float64)
       (let ((,name-var ,(concatenate 'string float-name "_f64")))
         (check-status ,name-var (,f64-fn ,@args)))
       (let ((,name-var ,float-name))
         (check-status ,name-var (,float-fn ,@args)))))
